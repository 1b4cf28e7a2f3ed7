package policy

// The policy tree learns the platforms, and WeChat's builtin level, from
// the adapters' registrations.
import _ "github.com/parleyhq/parley/channels/install"
