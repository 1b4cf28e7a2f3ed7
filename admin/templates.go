package admin

import (
	"fmt"
	"html/template"

	"github.com/parleyhq/parley/sessions"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"login", "overview", "skills", "policies", "conversations", "tools", "audit", "triggers"}

func (s *Server) parseTemplates() error {
	s.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(template.FuncMap{"shown": sessions.ShownKey}).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("admin: template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}
