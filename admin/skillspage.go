package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/skills"
)

type skillRow struct {
	Name, Description, Source, Replaced, State, Trust string
	Enabled, NeedsTrust, Trusted, ManualOnly          bool
	Bytes                                             int
	Loads                                             int64
}

type skillsData struct {
	Skills   []skillRow
	Warnings []string
	Detail   *skillDetail
}

type skillDetail struct {
	skillRow
	Path, Dir, SHA256, Version, Tags, AllowedTools string
	Body                                           string
	Listing                                        string
	File, FileText, FileErr                        string
	NextOffset                                     int
}

func (s *Server) skillRows(ctx context.Context) ([]skillRow, *skills.Catalog, error) {
	c := s.cfg.Skills.Registry.Catalog()
	disabled, err := s.cfg.Skills.State.Disabled(ctx)
	if err != nil {
		return nil, nil, err
	}
	loads := map[string]int64{}
	if reps, err := ListReplicas(ctx, s.cfg.Redis, s.cfg.Prefix); err == nil {
		for _, rep := range reps {
			for name, n := range rep.SkillLoads {
				loads[name] += n
			}
		}
	}
	var rows []skillRow
	for _, sk := range c.All() {
		row := skillRow{Name: sk.Name, Description: sk.Description, Source: string(sk.Source), Replaced: string(sk.Replaced),
			Enabled: !disabled[sk.Name], NeedsTrust: sk.NeedsTrust(), ManualOnly: sk.DisableModelInvocation,
			Bytes: sk.BodyBytes(), Loads: loads[sk.Name]}
		row.State = "enabled"
		if !row.Enabled {
			row.State = "disabled"
		}
		row.Trust = "not needed"
		if sk.NeedsTrust() {
			ok, err := s.cfg.Skills.State.Trusted(ctx, sk.Path, sk.SHA256)
			if err != nil {
				return nil, nil, err
			}
			row.Trusted = ok
			row.Trust = map[bool]string{true: "trusted", false: "untrusted"}[ok]
		}
		rows = append(rows, row)
	}
	return rows, c, nil
}

func (s *Server) skillsPage(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Skills", "skills"
	rows, c, err := s.skillRows(ctx)
	if err != nil {
		return "", err
	}
	d := &skillsData{Skills: rows}
	for _, w := range c.Warnings() {
		d.Warnings = append(d.Warnings, w.String())
	}
	if name := r.URL.Query().Get("skill"); name != "" {
		sk, ok := c.Get(name)
		if !ok {
			v.Error = "There is no skill named " + name + "."
		} else {
			d.Detail = s.skillDetail(r, sk, rows)
			v.Title = "Skill " + sk.Name
		}
	}
	v.Data = d
	return "skills", nil
}

func (s *Server) skillDetail(r *http.Request, sk *skills.Skill, rows []skillRow) *skillDetail {
	det := &skillDetail{Path: sk.Path, Dir: sk.Dir, SHA256: sk.SHA256, Version: sk.Version,
		Tags: strings.Join(sk.Tags, ", "), AllowedTools: strings.Join(sk.AllowedTools, " ")}
	// The body is on disk until it is shown; a file changed or gone since
	// the catalog was read shows why instead.
	if body, err := sk.ReadBody(); err != nil {
		det.Body = "(the body cannot be shown: " + err.Error() + ")"
	} else {
		det.Body = body
	}
	for _, row := range rows {
		if row.Name == sk.Name {
			det.skillRow = row
		}
	}
	// The files as load_skill(name, file) shows them to the model: the
	// same fence (no symlinks, no escapes) and the user's notes merged.
	if listing, err := skills.ReadFile(sk, s.cfg.Skills.Home, "", 0); err == nil {
		det.Listing = listing
	}
	if file := r.URL.Query().Get("file"); file != "" {
		det.File = file
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		text, err := skills.ReadFile(sk, s.cfg.Skills.Home, file, max(offset, 0))
		if err != nil {
			det.FileErr = err.Error()
		} else {
			det.FileText = text
		}
	}
	return det
}

// skillAction is on, off, trust or reload, with the rules of the chat's
// /skill commands.
func (s *Server) skillAction(w http.ResponseWriter, r *http.Request, id identity) (string, int, error) {
	ctx := r.Context()
	action, name := r.PostFormValue("action"), r.PostFormValue("skill")
	back := "/admin/skills"
	if r.PostFormValue("from") == "detail" && name != "" {
		back += "?skill=" + url.QueryEscape(name)
	}
	withDone := func(code, target string) string {
		sep := "?"
		if strings.Contains(back, "?") {
			sep = "&"
		}
		return back + sep + strings.TrimPrefix(doneURL("", code, target), "?")
	}
	switch action {
	case "on", "off":
		sk, ok := s.cfg.Skills.Registry.Catalog().Get(name)
		if !ok {
			return withDone("unknown", name), 0, nil
		}
		if err := s.cfg.Skills.State.SetDisabled(ctx, sk.Name, action == "off"); err != nil {
			s.audit(r, id, "skill "+action, sk.Name, "error")
			return "", 0, err
		}
		s.audit(r, id, "skill "+action, sk.Name, "ok")
		return withDone(action, sk.Name), 0, nil
	case "trust":
		sk, ok := s.cfg.Skills.Registry.Catalog().Get(name)
		if !ok {
			return withDone("unknown", name), 0, nil
		}
		if !sk.NeedsTrust() {
			return withDone("notrust", sk.Name), 0, nil
		}
		if err := s.cfg.Skills.State.Trust(ctx, sk.Path, sk.SHA256); err != nil {
			s.audit(r, id, "skill trust", sk.Name, "error")
			return "", 0, err
		}
		s.audit(r, id, "skill trust", sk.Name+" sha256 "+sk.SHA256, "ok")
		return withDone("trust", sk.Name), 0, nil
	case "reload":
		reload := s.cfg.Skills.Reload
		if reload == nil {
			reload = func(context.Context) (*skills.Catalog, error) { return s.cfg.Skills.Registry.Reload() }
		}
		c, err := reload(ctx)
		if err != nil {
			s.audit(r, id, "skills reload", "", "error")
			s.log.Error("admin: skills reload; the previous skills stay in use", "err", err)
			return doneURL("/admin/skills", "failed", "reload"), 0, nil
		}
		s.audit(r, id, "skills reload", "", "ok")
		return doneURL("/admin/skills", "reload", strconv.Itoa(c.Len())), 0, nil
	}
	return "", http.StatusBadRequest, nil
}
