package slacktest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Uploading a file, as Slack's Web API takes it since files.upload was
// retired:
//
//   - files.getUploadURLExternal (filename, length) answers an
//     upload_url on the file host and a file_id;
//   - the bytes are POSTed to upload_url, raw or as a multipart form
//     (its "file" part); the host answers 200 "OK - <length>";
//   - files.completeUploadExternal (files=[{id,title}], channel_id,
//     thread_ts, initial_comment) shares the uploaded files as one
//     message in the channel (the thread) and answers files=[{id,title}],
//     without the message's ts.
//
// The shared message is listed by conversations.replies and .history with
// its files (id, name, title, mimetype, size), as Slack lists a file
// share. Each step can fail: the API methods with Fail as any method, the
// byte upload with Fail(UploadStep, …), whose Written takes the bytes and
// then answers Status, or nothing (Hang).

// UploadStep is the name under which the byte upload to an upload_url is
// counted (Count) and scripted (Fail).
const UploadStep = "upload_url"

// Upload is one file shared with files.completeUploadExternal.
type Upload struct {
	FileID   string
	Name     string // the filename given to files.getUploadURLExternal
	Title    string
	Type     string // sniffed from the bytes, as Slack does
	Data     []byte
	Channel  string
	ThreadTS string
	Comment  string // initial_comment
	TS       string // the share message's ts
}

// uploadState is the fake's files in the making and shared.
type uploadState struct {
	announced map[string]announced // file id → what getUploadURLExternal was told
	received  map[string][]byte    // file id → the bytes uploaded
	shared    []Upload
	forged    string // the upload_url to give instead of the fake's own
	nextID    int
}

type announced struct {
	name   string
	length int
}

// Uploads lists the files shared, in order.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.uploads.shared...)
}

// ForgeUploadURL makes files.getUploadURLExternal answer u as the upload
// URL, as a compromised or impersonated API could.
func (s *Server) ForgeUploadURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uploads.forged = u
}

// upload answers the files methods; false for any other method.
func (s *Server) upload(w http.ResponseWriter, method string, p url.Values) bool {
	switch method {
	case "files.getUploadURLExternal":
		s.uploadURL(w, p)
	case "files.completeUploadExternal":
		s.completeUpload(w, p)
	case "files.upload":
		writeJSON(w, map[string]any{"ok": false, "error": "method_deprecated"})
	default:
		return false
	}
	return true
}

func (s *Server) uploadURL(w http.ResponseWriter, p url.Values) {
	length, _ := strconv.Atoi(p.Get("length"))
	if p.Get("filename") == "" || length <= 0 {
		writeJSON(w, map[string]any{"ok": false, "error": "missing_argument"})
		return
	}
	s.mu.Lock()
	u := &s.uploads
	if u.announced == nil {
		u.announced, u.received = map[string]announced{}, map[string][]byte{}
	}
	u.nextID++
	id := fmt.Sprintf("F%08d", u.nextID)
	u.announced[id] = announced{name: p.Get("filename"), length: length}
	target := s.srv.URL + "/upload/v1/" + id
	if u.forged != "" {
		target = u.forged
	}
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "upload_url": target, "file_id": id})
}

// serveUpload takes the bytes POSTed to an upload_url.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/v1/")
	fail := s.failureFor(UploadStep)
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	data, err := uploadedBytes(r)
	if err != nil {
		http.Error(w, "bad upload", http.StatusBadRequest)
		return
	}
	if fail != nil && !fail.Written {
		failUpload(w, r, *fail)
		return
	}
	s.mu.Lock()
	a, ok := s.uploads.announced[id]
	if ok && len(data) == a.length {
		s.uploads.received[id] = data
	}
	s.mu.Unlock()
	if fail != nil {
		failUpload(w, r, *fail)
		return
	}
	if !ok || len(data) != a.length {
		http.Error(w, "length does not match", http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "OK - %d", len(data))
}

// failUpload answers a byte upload scripted to fail.
func failUpload(w http.ResponseWriter, r *http.Request, f Failure) {
	if f.Hang {
		<-r.Context().Done()
		return
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
}

// uploadedBytes reads an upload's body: raw, or the "file" part of a
// multipart form.
func uploadedBytes(r *http.Request) ([]byte, error) {
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return io.ReadAll(r.Body)
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, err
		}
		if part.FormName() == "file" || part.FormName() == "filename" {
			return io.ReadAll(part)
		}
	}
}

func (s *Server) completeUpload(w http.ResponseWriter, p url.Values) {
	var files []completed
	if err := json.Unmarshal([]byte(p.Get("files")), &files); err != nil || len(files) == 0 {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments"})
		return
	}
	s.mu.Lock()
	out, ok := s.share(files, p)
	s.mu.Unlock()
	if !ok {
		writeJSON(w, map[string]any{"ok": false, "error": "file_not_found"})
		return
	}
	writeJSON(w, map[string]any{"ok": true, "files": out})
}

// share completes the uploads of files, shared as one message in the
// channel_id of p (in its thread_ts) when it names one; false when one of
// them was never uploaded (or was completed already). s.mu is held.
func (s *Server) share(files []completed, p url.Values) ([]map[string]string, bool) {
	u := &s.uploads
	for _, f := range files {
		if _, ok := u.received[f.ID]; !ok {
			return nil, false
		}
	}
	channel, thread, comment := p.Get("channel_id"), p.Get("thread_ts"), p.Get("initial_comment")
	var ts string
	if channel != "" {
		ts = fmt.Sprintf("1800000000.%06d", s.nextTS)
		s.nextTS++
		s.messages = append(s.messages, &Msg{Channel: channel, ThreadTS: thread, TS: ts, Text: comment, At: time.Now()})
		s.made(ts, p)
	}
	var out []map[string]string
	for _, f := range files {
		data := u.received[f.ID]
		delete(u.received, f.ID) // completed: it cannot be completed again
		title := cmp.Or(f.Title, u.announced[f.ID].name)
		if channel != "" {
			u.shared = append(u.shared, Upload{FileID: f.ID, Name: u.announced[f.ID].name, Title: title, Type: http.DetectContentType(data),
				Data: data, Channel: channel, ThreadTS: thread, Comment: comment, TS: ts})
		}
		out = append(out, map[string]string{"id": f.ID, "title": title})
	}
	return out, true
}

// completed is one entry of completeUploadExternal's files.
type completed struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// sharedFiles is the files array conversations.replies lists with the
// message ts (nil for a message that shared none).
func (s *Server) sharedFiles(ts string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, f := range s.uploads.shared {
		if f.TS == ts {
			out = append(out, map[string]any{"id": f.FileID, "name": f.Name, "title": f.Title, "mimetype": f.Type,
				"size": len(f.Data), "mode": "hosted", "user": BotUserID})
		}
	}
	return out
}
