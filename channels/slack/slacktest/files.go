package slacktest

import (
	"fmt"
	"net/http"
	"strings"
)

// fileStore is what the fake serves under /files/, as Slack serves
// url_private and url_private_download on files.slack.com: to the bot
// token only; without it Slack answers 200 with its HTML sign-in page.
type fileStore struct {
	data     map[string][]byte
	mime     map[string]string
	status   map[string]int    // answer with this status instead
	redirect map[string]string // answer 302 to this location instead
	endless  map[string]bool   // stream bytes forever
	fetches  []string
}

// File adds a file the fake serves and returns its object as Slack puts
// it in an event's files array.
func (s *Server) File(id, name, mime string, data []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.files
	if f.data == nil {
		f.data, f.mime = map[string][]byte{}, map[string]string{}
		f.status, f.redirect, f.endless = map[string]int{}, map[string]string{}, map[string]bool{}
	}
	f.data[id], f.mime[id] = data, mime
	url := s.srv.URL + "/files/" + id + "/" + name
	return map[string]any{"id": id, "name": name, "title": name, "mimetype": mime, "filetype": "auto",
		"size": len(data), "mode": "hosted", "url_private": url, "url_private_download": url + "?download=1"}
}

// FileStatus makes the file answer status (403: the bot lacks access).
func (s *Server) FileStatus(id string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files.status[id] = status
}

// FileRedirect makes the file answer a redirect to location.
func (s *Server) FileRedirect(id, location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files.redirect[id] = location
}

// FileEndless makes the file a download that never ends.
func (s *Server) FileEndless(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files.endless[id] = true
}

// FileFetches lists the ids of the files downloaded, in order.
func (s *Server) FileFetches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.files.fetches...)
}

// WithFiles adds files (from File) to an event, as a file_share.
func WithFiles(event map[string]any, files ...map[string]any) map[string]any {
	list := make([]any, len(files))
	for i, f := range files {
		list[i] = f
	}
	event["files"] = list
	if event["type"] == "message" {
		event["subtype"] = "file_share"
	}
	return event
}

// signIn is what Slack serves for a file URL without a valid token.
const signIn = "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to your workspace</body></html>"

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	s.mu.Lock()
	f := &s.files
	f.fetches = append(f.fetches, id)
	data, ok := f.data[id]
	mime, status, redirect, endless := f.mime[id], f.status[id], f.redirect[id], f.endless[id]
	s.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+BotToken:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, signIn)
	case !ok:
		http.NotFound(w, r)
	case status != 0:
		http.Error(w, http.StatusText(status), status)
	case redirect != "":
		http.Redirect(w, r, redirect, http.StatusFound)
	case endless:
		w.Header().Set("Content-Type", mime)
		chunk := make([]byte, 32<<10)
		copy(chunk, data)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	default:
		w.Header().Set("Content-Type", mime)
		w.Write(data)
	}
}
