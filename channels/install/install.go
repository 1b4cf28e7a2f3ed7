// Package install links every chat platform Parley ships into a program.
// Each adapter package registers its platform (its name, its section of
// the configuration file, its builtin policy) from an init function;
// importing this package for its side effects is what makes the platforms
// known to config, policy and `parley serve`:
//
//	import _ "github.com/parleyhq/parley/channels/install"
//
// Adding a platform is its own package plus one line here.
package install

import (
	_ "github.com/parleyhq/parley/channels/console"
	_ "github.com/parleyhq/parley/channels/feishu"
	_ "github.com/parleyhq/parley/channels/slack"
	_ "github.com/parleyhq/parley/channels/wechat"
	_ "github.com/parleyhq/parley/channels/wechat/officialaccount"
	_ "github.com/parleyhq/parley/channels/wechat/wecomapp"
)
