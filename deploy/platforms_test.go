package deploy

// The deployment files are checked against what the binary reads, and the
// binary links every platform and every tool section in.
import (
	_ "github.com/parleyhq/parley/agent/mcp"
	_ "github.com/parleyhq/parley/agent/web"
	_ "github.com/parleyhq/parley/channels/install"
)
