package agent

// Tool schemas on a budget: when the schemas of the tools a conversation
// may use would make every request heavy (each MCP tool adds its JSON to
// every model call of every turn), the request offers only the builtins,
// the pinned tools, the tools the conversation already used or found, and
// find_tools, through which the model finds the rest.
//
// What is offered is read from the history each time, so every replica
// offers the same tools without any state of its own, and it only grows
// within a conversation: a tool joins when a call to it or a find_tools
// result naming it enters the history, and the ones that joined are
// offered after the ones before them, so the request's tools part keeps
// its prefix from call to call.

import (
	"errors"
	"fmt"
	"path"

	"github.com/parleyhq/parley/config"
)

// ToolsPartName names the agent's inline part of tools: (tools.schema_budget,
// tools.pinned) for config.Tool.
const ToolsPartName = "agent"

// DefaultSchemaBudget is tools.schema_budget when the file says nothing:
// about fourteen MCP tools of a typical size.
const DefaultSchemaBudget = 8192

// ToolsSection is the agent's keys directly under tools:.
type ToolsSection struct {
	// SchemaBudget is how many bytes of tool schemas (their JSON as sent)
	// a request may carry before the tools beyond the builtins, the
	// pinned and the used ones are left to find_tools. 0 always leaves
	// them to find_tools.
	SchemaBudget int `yaml:"schema_budget"`
	// Pinned are tools always offered, by name or path.Match glob
	// ("grafana__*"), even over the budget.
	Pinned []string `yaml:"pinned"`
}

// DefaultToolsSection is the agent's part of tools: when the file says
// nothing.
func DefaultToolsSection() *ToolsSection {
	return &ToolsSection{SchemaBudget: DefaultSchemaBudget, Pinned: []string{}}
}

func init() {
	config.RegisterToolSection(config.ToolSection{Name: ToolsPartName, Inline: true, NewConfig: func() config.SectionConfig { return DefaultToolsSection() }})
}

// Env binds no variables: both keys are the file's.
func (s *ToolsSection) Env() []config.EnvVar { return nil }

// Validate refuses a negative budget and pinned names that are neither a
// tool's name nor a glob of one.
func (s *ToolsSection) Validate() error {
	var errs []error
	if s.SchemaBudget < 0 {
		errs = append(errs, fmt.Errorf("schema_budget: %d is negative; write a number of bytes (0 leaves every tool but the builtins and pinned ones to find_tools)", s.SchemaBudget))
	}
	for i, p := range s.Pinned {
		if !validPin(p) {
			errs = append(errs, fmt.Errorf("pinned[%d]: %q is not a tool name or a glob of one (letters, digits, _ and -, with * ? [ ])", i, p))
		}
	}
	return errors.Join(errs...)
}

// validPin reports whether p is a tool name or a well-formed glob of one.
func validPin(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	if _, err := path.Match(p, ""); err != nil {
		return false
	}
	for _, r := range p {
		switch {
		case r == '*' || r == '?' || r == '[' || r == ']' || r == '^':
		case toolNameChars.Match(string(r), 1, 1):
		default:
			return false
		}
	}
	return true
}

// pinned reports whether name matches one of the patterns.
func pinned(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// isBuiltin reports whether t is one of Parley's own tools (web, skill,
// send_file…), always offered: tools from a source (MCP) say which.
func isBuiltin(t Tool) bool {
	_, sourced := t.(interface{ Source() string })
	return !sourced
}

// offered is the tools of one request: their encodings, in order, and
// whether find_tools is among them (the budget is in force).
type offered struct {
	tools [][]byte
	find  bool
}

// offerTools lists the tools of a request: every tool the conversation
// may use and that can run now when their schemas fit the budget;
// otherwise the builtins and pinned ones (by name), find_tools, and then
// the joined ones in the order they joined the conversation.
func (a *Agent) offerTools(allow func(string) bool, joined func() []string) offered {
	var all []Tool
	size := 0
	for _, t := range a.tools.All() {
		if allow != nil && !allow(t.Name()) || !isAvailable(t) || t.Name() == FindToolsName {
			continue
		}
		all = append(all, t)
		size += len(a.encodeTool(t))
	}
	budget := a.cfg.ToolBudget
	if size <= budget.SchemaBudget {
		out := offered{tools: make([][]byte, 0, len(all))}
		for _, t := range all {
			out.tools = append(out.tools, a.encodeTool(t))
		}
		return out
	}
	out := offered{find: true}
	rest := map[string]Tool{}
	for _, t := range all {
		if isBuiltin(t) || pinned(budget.Pinned, t.Name()) {
			out.tools = append(out.tools, a.encodeTool(t))
		} else {
			rest[t.Name()] = t
		}
	}
	out.tools = append(out.tools, findToolsEncoded)
	for _, name := range joined() {
		if t, ok := rest[name]; ok {
			out.tools = append(out.tools, a.encodeTool(t))
			delete(rest, name) // once
		}
	}
	return out
}

// withFindTools lets find_tools through allow: it is the agent's own and
// lists only tools allow lets through.
func withFindTools(allow func(string) bool) func(string) bool {
	if allow == nil {
		return nil
	}
	return func(name string) bool { return name == FindToolsName || allow(name) }
}
