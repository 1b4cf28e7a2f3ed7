package deploy

// The deployment files are checked against what the binary reads, and the
// binary links every platform in.
import _ "github.com/parleyhq/parley/channels/install"
