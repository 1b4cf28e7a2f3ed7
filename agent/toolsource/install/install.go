// Package install links every tool source Parley ships into a program.
// Each source's package registers its sections of the configuration file
// (tools.mcp, tools.web_fetch, …) and its tool source (toolsource.Register)
// from an init function; importing this package for its side effects is
// what makes them known to config and to `parley serve`:
//
//	import _ "github.com/parleyhq/parley/agent/toolsource/install"
//
// Adding a tool source is its own package plus one line here.
package install

import (
	_ "github.com/parleyhq/parley/agent/mcp"
	_ "github.com/parleyhq/parley/agent/web"
)
