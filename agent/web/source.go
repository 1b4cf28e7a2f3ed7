package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/agent/toolsource"
	"github.com/parleyhq/parley/config"
)

func init() {
	toolsource.Register(toolsource.Source{Name: "web", Open: openSource, Names: names})
}

// names lists web_fetch, and web_search when a provider is configured;
// none when the sections are wrong, which Load reports.
func names(c config.Config) toolsource.Names {
	var n toolsource.Names
	tools, err := Tools(FromConfig(c), Deps{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return n
	}
	for _, t := range tools {
		n.Tools = append(n.Tools, t.Name())
	}
	return n
}

// openSource registers web_fetch, and web_search when a provider is
// configured; they run in the process and are never down.
func openSource(_ context.Context, c config.Config, deps toolsource.Deps) (toolsource.Opened, error) {
	tools, err := Tools(FromConfig(c), Deps{Logger: deps.Log})
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		if err := deps.Registry.Register(t); err != nil {
			return nil, err
		}
	}
	return source{}, nil
}

// source is the web tools, which need nothing beyond their registration:
// they run in the process, so nothing of theirs is ever down, and they
// show nothing beside their rows. Each method implements
// toolsource.Opened.
type source struct{}

func (source) Close() error                                   { return nil }
func (source) Down() []string                                 { return nil }
func (source) Annotate(*toolsource.Row)                       {}
func (source) Placeholders([]toolsource.Row) []toolsource.Row { return nil }
func (source) Notes() []string                                { return nil }
func (source) AfterList(time.Duration) string                 { return "" }
func (source) State() (string, any)                           { return "", nil }
