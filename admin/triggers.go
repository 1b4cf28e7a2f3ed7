package admin

import (
	"net/http"

	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
)

// triggersData is the Triggers page: every webhook with its last request
// and outcome, every schedule with its next fire and latest result.
type triggersData struct {
	Webhooks  []webhook.Status
	Schedules []schedule.Status
}

// triggersPage lists the webhooks and schedules as `parley triggers list`
// does. It changes nothing: the webhooks and the file's schedules change
// in the file, a chat's schedules with /schedule in that chat.
func (s *Server) triggersPage(r *http.Request, id identity, v *view) (string, error) {
	v.Title, v.Nav = "Triggers", "triggers"
	d := &triggersData{}
	v.Data = d
	if s.cfg.Triggers == nil {
		return "triggers", nil
	}
	var err error
	if d.Webhooks, err = s.cfg.Triggers.Webhooks(r.Context()); err != nil {
		return "", err
	}
	if d.Schedules, err = s.cfg.Triggers.Schedules(r.Context()); err != nil {
		return "", err
	}
	return "triggers", nil
}
