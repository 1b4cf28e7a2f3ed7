package admin

import (
	"errors"
	"net/http"

	"github.com/parleyhq/parley/audit"
)

// auditData is the Audit page: the filter as given and what it selects.
type auditData struct {
	Since, User, Tool string
	Retention         string
	Entries           []audit.Entry
}

// badRequest is a page's refusal of its query: shown with a 400.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// auditPage lists the ledger's entries with the filters of `parley
// audit`. The query comes from anyone who can send a link: a filter the
// ledger refuses (too long, not a duration, past the retention, a value
// given twice) is answered 400 before Redis is asked.
func (s *Server) auditPage(r *http.Request, id identity, v *view) (string, error) {
	v.Title, v.Nav = "Audit", "audit"
	q := r.URL.Query()
	d := &auditData{Since: q.Get("since"), User: q.Get("user"), Tool: q.Get("tool"), Retention: roundDuration(s.ledger.Retention())}
	if d.Since == "" {
		d.Since = "24h"
	}
	v.Data = d
	for _, k := range []string{"since", "user", "tool", "limit"} {
		if len(q[k]) > 1 {
			return "audit", badRequest{"Give each filter once."}
		}
	}
	f, err := audit.ParseFilter(d.Since, d.User, d.Tool, q.Get("limit"))
	if err == nil {
		err = f.Validate(s.ledger.Retention())
	}
	if err != nil {
		return "audit", badRequest{"That filter cannot be used: " + err.Error() + "."}
	}
	if d.Entries, err = s.ledger.Query(r.Context(), f); err != nil && !errors.Is(err, audit.ErrFilter) {
		return "", err
	}
	return "audit", nil
}
