package mcp

// The real platforms, with WeChat's builtin policy (no write tools), so
// that the policy tests here decide as `parley serve` does. Only the tests
// link them: the package itself knows no channel.
import _ "github.com/parleyhq/parley/channels/install"
