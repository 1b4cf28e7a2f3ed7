package admin

import (
	"net/http"
	"slices"
	"strings"
)

type toolsData struct {
	Tools   []ToolStatus
	Servers []serverView
}

type serverView struct {
	Name, State, Error string
	Tools              int
}

func (s *Server) toolsPage(r *http.Request, id identity, v *view) (string, error) {
	v.Title, v.Nav = "Tools", "tools"
	d := &toolsData{Tools: s.cfg.Tools.ToolStatuses()}
	servers := map[string]*serverView{}
	var order []string
	for _, t := range d.Tools {
		name, ok := strings.CutPrefix(t.Source, "mcp:")
		if !ok {
			continue
		}
		sv, ok := servers[name]
		if !ok {
			sv = &serverView{Name: name, State: t.ServerState, Error: t.ServerError}
			servers[name] = sv
			order = append(order, name)
		}
		if t.Class != "" {
			sv.Tools++
		}
	}
	slices.Sort(order)
	for _, n := range order {
		d.Servers = append(d.Servers, *servers[n])
	}
	v.Data = d
	return "tools", nil
}
