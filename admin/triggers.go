package admin

import (
	"net/http"

	"github.com/parleyhq/parley/triggers/schedule"
)

// triggersData is the Triggers page: every schedule with its next fire
// and latest result.
type triggersData struct {
	Schedules []schedule.Status
}

// triggersPage lists the schedules as `parley triggers list` does. It
// changes nothing: the file's schedules change in the file, a chat's with
// /schedule in that chat.
func (s *Server) triggersPage(r *http.Request, id identity, v *view) (string, error) {
	v.Title, v.Nav = "Triggers", "triggers"
	d := &triggersData{}
	v.Data = d
	if s.cfg.Triggers == nil {
		return "triggers", nil
	}
	var err error
	if d.Schedules, err = s.cfg.Triggers.Schedules(r.Context()); err != nil {
		return "", err
	}
	return "triggers", nil
}
