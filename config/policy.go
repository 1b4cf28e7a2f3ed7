package config

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Policies is the policy tree: a global default, then per platform, per
// workspace (Slack team, Feishu tenant, WeChat account) and per chat. The
// policy package resolves it most-specific-first.
type Policies struct {
	Default   Level                     `yaml:"default"`
	Platforms map[string]PlatformPolicy `yaml:"platforms"`
}

// Level is what any one level of the tree may set. Nil slices and pointers
// mean "not set here": the level above decides.
type Level struct {
	Tools  ToolRules  `yaml:"tools"`
	Skills SkillRules `yaml:"skills"`
	Access Access     `yaml:"access"`
	Admins []string   `yaml:"admins"`
}

// ToolRules allow and deny tools by name or glob; deny wins. Write false
// drops every tool that declares it writes.
type ToolRules struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
	Write *bool    `yaml:"write"`
}

// SkillRules hide skills from the index, load_skill, find_skills and /skill:.
type SkillRules struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// Access says who may talk to the bot. Empty allowlists allow everyone.
type Access struct {
	Users []string `yaml:"users"`
	Chats []string `yaml:"chats"`
	DMs   *bool    `yaml:"dms"`
}

// PlatformPolicy is a Level plus its workspaces.
type PlatformPolicy struct {
	Level      `yaml:",inline"`
	Workspaces map[string]WorkspacePolicy `yaml:"workspaces"`
}

// WorkspacePolicy is a Level plus its chats.
type WorkspacePolicy struct {
	Level `yaml:",inline"`
	Chats map[string]Level `yaml:"chats"`
}

func (p Policies) validate() error {
	var errs []string
	check := func(key string, l Level) {
		for _, list := range []struct {
			name string
			pats []string
		}{{"tools.allow", l.Tools.Allow}, {"tools.deny", l.Tools.Deny}, {"skills.allow", l.Skills.Allow}, {"skills.deny", l.Skills.Deny}} {
			for _, pat := range list.pats {
				if _, err := path.Match(pat, ""); err != nil || pat == "" {
					errs = append(errs, fmt.Sprintf("%s.%s: %q is not a valid name or glob", key, list.name, pat))
				}
			}
		}
	}
	check("policies.default", p.Default)
	names := make([]string, 0, len(p.Platforms))
	for name := range p.Platforms {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pp := p.Platforms[name]
		key := "policies.platforms." + name
		if _, ok := LookupPlatform(name); !ok {
			errs = append(errs, fmt.Sprintf("%s: unknown platform (want one of %s)", key, strings.Join(PlatformNames(), ", ")))
			continue
		}
		check(key, pp.Level)
		for ws, wp := range pp.Workspaces {
			wkey := key + ".workspaces." + ws
			check(wkey, wp.Level)
			for chat, cl := range wp.Chats {
				check(wkey+".chats."+chat, cl)
			}
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
