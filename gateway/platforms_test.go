package gateway_test

// The policies of these tests rely on the platforms' registrations
// (WeChat's builtin level), as the binary does.
import _ "github.com/parleyhq/parley/channels/install"
