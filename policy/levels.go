package policy

import (
	"maps"
	"slices"

	"github.com/parleyhq/parley/config"
)

// KeyedLevel is one level of the tree with its key in the file,
// "policies.platforms.slack.workspaces.T1".
type KeyedLevel struct {
	Key string
	// Platform is the platform whose section the level is in, "" for
	// the default.
	Platform string
	Level    config.Level
}

// Levels lists every level of the tree with its key: the default, then
// each platform, its accounts, its workspaces and their chats, by name. It lets the
// packages that own what a level names (the agent's models, the tools and
// skills) check those names without the policy knowing them.
func (p *Config) Levels() []KeyedLevel {
	out := []KeyedLevel{{Key: "policies.default", Level: p.Default}}
	for _, name := range slices.Sorted(maps.Keys(p.Platforms)) {
		pp := p.Platforms[name]
		key := "policies.platforms." + name
		out = append(out, KeyedLevel{key, name, pp.Level})
		for _, acc := range slices.Sorted(maps.Keys(pp.Accounts)) {
			out = append(out, KeyedLevel{key + ".accounts." + acc, name, pp.Accounts[acc]})
		}
		for _, ws := range slices.Sorted(maps.Keys(pp.Workspaces)) {
			wp := pp.Workspaces[ws]
			wkey := key + ".workspaces." + ws
			out = append(out, KeyedLevel{wkey, name, wp.Level})
			for _, chat := range slices.Sorted(maps.Keys(wp.Chats)) {
				out = append(out, KeyedLevel{wkey + ".chats." + chat, name, wp.Chats[chat]})
			}
		}
	}
	return out
}
