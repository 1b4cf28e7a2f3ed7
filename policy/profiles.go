package policy

// Profiles: named personas a level of the tree chooses (LEVEL.profile).
// A profile is a system prompt (or a paragraph added to the default one)
// with the model, tools and skills rules that go with it. The profile of
// a scope is the one its most specific level names; its rules apply as if
// written at that level, just below the level's own keys, so a level's
// explicit rule beats its profile's and a profile beats every level above
// the one that chose it.

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/parleyhq/parley/config"
)

// ProfilesSectionName is the key of the profiles: section.
const ProfilesSectionName = "profiles"

// Profile is one entry of profiles:, profiles.NAME.
type Profile struct {
	// DisplayName is how the console, `parley policy explain` and
	// `parley config check` name the profile to people ("Ops assistant").
	DisplayName string `yaml:"display_name,omitempty"`
	// SystemPrompt replaces the default system prompt (model.system_prompt).
	SystemPrompt string `yaml:"system_prompt,omitempty"`
	// SystemPromptAppend is added, as a paragraph of its own, after the
	// default system prompt. At most one of the two is set.
	SystemPromptAppend string `yaml:"system_prompt_append,omitempty"`
	// Model names the model of the profile's turns: config.DefaultModelKey
	// or a key of models:. Empty leaves it to the levels.
	Model string `yaml:"model,omitempty"`
	// Tools and Skills are rules as at any level.
	Tools  config.ToolRules  `yaml:"tools,omitempty"`
	Skills config.SkillRules `yaml:"skills,omitempty"`
}

// level is the profile's rules as a level of the tree, sharing p's lists.
func (p Profile) level() config.Level {
	return config.Level{Tools: p.Tools, Skills: p.Skills, Model: p.Model}
}

// Profiles is the profiles: section: profiles by name.
type Profiles struct {
	ByName map[string]Profile `yaml:",inline"`
}

func init() {
	config.RegisterSection(config.SectionSpec{
		Name:      ProfilesSectionName,
		NewConfig: func() config.SectionConfig { return &Profiles{} },
		// The models a profile names are the agent's, which checks them;
		// its tool and skill names are checked where the tools and skills
		// are known (parley config check, parley serve). The levels that
		// name a profile are checked with the policies: section.
	})
}

// ProfilesFromConfig returns c's profiles: section, or none when c has
// none (a Config built by hand).
func ProfilesFromConfig(c config.Config) *Profiles {
	if p, ok := config.SectionOf[*Profiles](c, ProfilesSectionName); ok {
		return p
	}
	return &Profiles{}
}

// Env implements config.SectionConfig: no variable sets a profile.
func (p *Profiles) Env() []config.EnvVar { return nil }

// profileNameRE is what a profile may be called: a word that reads as
// one segment of a key (profiles.NAME.model) and of a log line.
var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Validate implements config.SectionConfig: names, one prompt at most,
// and the rules' globs. Problems name their keys within the section.
func (p *Profiles) Validate() error {
	var errs []string
	for _, name := range p.Names() {
		prof := p.ByName[name]
		if !profileNameRE.MatchString(name) {
			errs = append(errs, fmt.Sprintf("%s: a profile's name is letters, digits, _ and - (starting with a letter or digit)", name))
			continue
		}
		if prof.SystemPrompt != "" && prof.SystemPromptAppend != "" {
			errs = append(errs, fmt.Sprintf("%s.system_prompt_append: set system_prompt (which replaces the default prompt) or system_prompt_append (which adds to it), not both", name))
		}
		if strings.TrimSpace(prof.SystemPrompt) == "" && prof.SystemPrompt != "" {
			errs = append(errs, fmt.Sprintf("%s.system_prompt: is blank; leave it out to keep the default prompt", name))
		}
		for _, list := range []struct {
			name string
			pats []string
		}{{"tools.allow", prof.Tools.Allow}, {"tools.deny", prof.Tools.Deny}, {"tools.approve", prof.Tools.Approve}, {"skills.allow", prof.Skills.Allow}, {"skills.deny", prof.Skills.Deny}} {
			for _, pat := range list.pats {
				if _, err := path.Match(pat, ""); err != nil || pat == "" {
					errs = append(errs, fmt.Sprintf("%s.%s: %q is not a valid name or glob", name, list.name, pat))
				}
			}
		}
	}
	return config.Problems(errs)
}

// Names lists the profiles, sorted.
func (p *Profiles) Names() []string {
	return slices.Sorted(maps.Keys(p.ByName))
}

// Levels lists each profile's rules as a level with its key,
// "profiles.ops", for the packages that check the names a level holds
// (the agent's models, the tools, the skills).
func (p *Profiles) Levels() []KeyedLevel {
	out := make([]KeyedLevel, 0, len(p.ByName))
	for _, name := range p.Names() {
		out = append(out, KeyedLevel{Key: ProfilesSectionName + "." + name, Level: cloneLevel(p.ByName[name].level())})
	}
	return out
}

// Uses lists, by profile name, the keys of the levels of tree t that
// choose it ("policies.platforms.slack.workspaces.T1.chats.C1"), in the
// order of t.Levels; a profile no level chooses has none.
func (p *Profiles) Uses(t *Config) map[string][]string {
	out := map[string][]string{}
	for _, l := range t.Levels() {
		if l.Level.Profile != "" {
			out[l.Level.Profile] = append(out[l.Level.Profile], l.Key)
		}
	}
	return out
}

// checkProfileNames is the policies: section's check of the profiles its
// levels name against profiles:.
func (t *Config) checkProfileNames(profiles *Profiles) []string {
	var errs []string
	for _, l := range t.Levels() {
		name := l.Level.Profile
		if name == "" {
			continue
		}
		if _, known := config.LookupPlatform(l.Platform); l.Platform != "" && !known {
			continue // the policy names the unknown platform
		}
		if _, ok := profiles.ByName[name]; !ok {
			want := "profiles: has none"
			if names := profiles.Names(); len(names) > 0 {
				want = "want one of " + strings.Join(names, ", ")
			}
			errs = append(errs, fmt.Sprintf("%s.profile: unknown profile %q (%s)", l.Key, name, want))
		}
	}
	return errs
}

// Chosen is the profile in effect in a scope.
type Chosen struct {
	// Name is the profile's name; "" when no level chooses one.
	Name string
	// Level is the level whose profile: key chose it.
	Level string
	Profile
}

// Profile returns the profile of the scope and the level that chose it.
func (e *Effective) Profile() Chosen { return e.profile }

// withProfile inserts into levels, least specific first, the profile the
// most specific level chooses, just below that level (see the package
// comment). A name profiles: does not have, which config validation
// refuses, chooses nothing.
func (r *Resolver) withProfile(levels []level) []level {
	for i := len(levels) - 1; i >= 0; i-- {
		name := levels[i].cfg.Profile
		if name == "" {
			continue
		}
		prof, ok := r.profiles[name]
		if !ok {
			continue
		}
		chosen := &Chosen{Name: name, Level: levels[i].name, Profile: prof}
		pl := level{name: fmt.Sprintf("%s.%s (chosen at %s)", ProfilesSectionName, name, levels[i].name), cfg: prof.level(), profile: chosen}
		return slices.Insert(slices.Clip(levels), i, pl)
	}
	return levels
}

// WithProfiles returns a copy of r whose scopes take their profile from
// p (see LEVEL.profile). p is copied, so later changes to the caller's
// maps and lists cannot change its decisions; the Effective policies
// share the copy's lists, as they share the tree's.
func (r *Resolver) WithProfiles(p *Profiles) *Resolver {
	c := *r
	c.resolved = new(resolvedScopes)
	c.profiles = make(map[string]Profile, len(p.ByName))
	for name, prof := range p.ByName {
		l := cloneLevel(prof.level())
		prof.Tools, prof.Skills = l.Tools, l.Skills
		c.profiles[name] = prof
	}
	return &c
}

// explainProfile is the profile in effect and what it makes of the
// system prompt.
func explainProfile(e *Effective) Section {
	p := e.profile
	if p.Name == "" {
		return Section{Title: "PROFILE", Tables: []Table{{Rows: [][]string{{"none", "the default system prompt", LevelBuiltin}}}}}
	}
	prompt := "the default system prompt"
	switch {
	case p.SystemPrompt != "":
		prompt = fmt.Sprintf("its own system prompt (%d characters), instead of the default", len([]rune(p.SystemPrompt)))
	case p.SystemPromptAppend != "":
		prompt = fmt.Sprintf("the default system prompt, with %d characters appended", len([]rune(p.SystemPromptAppend)))
	}
	name := p.Name
	if p.DisplayName != "" {
		name += " (" + p.DisplayName + ")"
	}
	return Section{Title: "PROFILE", Tables: []Table{{Rows: [][]string{{name, prompt, p.Level}}}}}
}

// NewFromConfig returns the Resolver of c: its policies: tree with its
// profiles: (see New and WithProfiles).
func NewFromConfig(c config.Config) *Resolver {
	return New(*FromConfig(c)).WithProfiles(ProfilesFromConfig(c))
}
