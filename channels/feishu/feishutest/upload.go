package feishutest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Uploading images and files, as the Open API takes them:
//
//   - POST /open-apis/im/v1/images, multipart: image_type=message and the
//     image (≤ 10 MiB), answers data.image_key;
//   - POST /open-apis/im/v1/files, multipart: file_type (opus, mp4, pdf,
//     doc, xls, ppt, stream), file_name and the file (≤ 30 MiB, not
//     empty), answers data.file_key;
//   - then an image, file or post message (reply, create) names the key.
//
// Each step can fail: Fail("image_upload" | "file_upload", …) as any op,
// and DropAnswer(op, nth) makes the nth call of op take effect and then
// close the connection without an answer (the platform did it; the caller
// never heard). Files lists what reached the chat: each message naming
// an uploaded key, with the bytes.

// Upload limits of the Open API.
const (
	MaxImageBytes = 10 << 20
	MaxFileBytes  = 30 << 20
)

// File is one image or file message the fake accepted, with what was
// uploaded for it.
type File struct {
	Sent            // the message (its Kind, ReplyTo, ReplyInThread, UUID…)
	Key      string // the image_key or file_key it names
	Name     string // the file_name uploaded (files only)
	FileType string // the file_type uploaded (files only)
	Type     string // sniffed from the bytes
	Data     []byte
	Caption  string // the text of a post carrying the image
}

type uploaded struct {
	data           []byte
	name, fileType string
}

// uploads is the fake's uploaded keys and dropped answers.
type uploads struct {
	keys  map[string]uploaded // image_key or file_key → what was uploaded
	n     int
	drops map[string][]int // op → the calls still to drop, counted from now
	made  map[string]int   // op → uploads taken, failed ones not
}

// fileTypes are the file_type values im/v1/files takes.
var fileTypes = map[string]bool{"opus": true, "mp4": true, "pdf": true, "doc": true, "xls": true, "ppt": true, "stream": true}

// DropAnswer makes the nth call of op from now (1 for the next; op is
// image_upload, file_upload, reply or create) take effect and then drop
// the connection unanswered.
func (s *Server) DropAnswer(op string, nth int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up.drops == nil {
		s.up.drops = map[string][]int{}
	}
	s.up.drops[op] = append(s.up.drops[op], nth)
}

// Uploaded is how many uploads of op (image_upload, file_upload) the fake
// took.
func (s *Server) Uploaded(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up.made[op]
}

// Files lists the image and file messages accepted, in order, each with
// the bytes uploaded for it (a message naming a key never uploaded is
// left out: Feishu refuses it).
func (s *Server) Files() []File {
	var out []File
	for _, m := range s.Sent() {
		key, caption := sentKey(m.MsgType, m.Content)
		s.mu.Lock()
		u, ok := s.up.keys[key]
		s.mu.Unlock()
		if key == "" || !ok {
			continue
		}
		out = append(out, File{Sent: m, Key: key, Name: u.name, FileType: u.fileType, Type: http.DetectContentType(u.data),
			Data: u.data, Caption: caption})
	}
	return out
}

// sentKey is the image_key or file_key a message names, and a post's text.
func sentKey(msgType, content string) (key, text string) {
	var c struct {
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
	}
	switch msgType {
	case "image", "file":
		_ = json.Unmarshal([]byte(content), &c)
		return c.ImageKey + c.FileKey, ""
	case "post":
		var p map[string]struct {
			Content [][]struct {
				Tag      string `json:"tag"`
				Text     string `json:"text"`
				ImageKey string `json:"image_key"`
			} `json:"content"`
		}
		_ = json.Unmarshal([]byte(content), &p)
		for _, lang := range p {
			var texts []string
			for _, line := range lang.Content {
				for _, el := range line {
					switch {
					case el.Tag == "img" && key == "":
						key = el.ImageKey
					case el.Tag == "text" || el.Tag == "md":
						texts = append(texts, el.Text)
					}
				}
			}
			return key, strings.Join(texts, "\n")
		}
	}
	return "", ""
}

// dropAnswer serves a call scripted with DropAnswer: it is answered to
// nobody, and the connection closed. false for any other call.
func (s *Server) dropAnswer(w http.ResponseWriter, r *http.Request) bool {
	op := opOf(r)
	if r.Header.Get(droppedHeader) != "" {
		return false // the call itself, whose answer goes nowhere
	}
	s.mu.Lock()
	drop, left := false, s.up.drops[op][:0]
	for _, n := range s.up.drops[op] {
		switch {
		case n == 1:
			drop = true
		case n > 1:
			left = append(left, n-1)
		}
	}
	if len(s.up.drops[op]) > 0 {
		s.up.drops[op] = left
	}
	s.mu.Unlock()
	if !drop {
		return false
	}
	r.Header.Set(droppedHeader, "1")
	s.serve(httptest.NewRecorder(), r)
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("feishutest: cannot drop an answer")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
	return true
}

// droppedHeader marks the call dropAnswer makes take effect.
const droppedHeader = "X-Feishutest-Dropped"

// opOf names the op of a call DropAnswer can drop, or "".
func opOf(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method != http.MethodPost:
		return ""
	case p == "/open-apis/im/v1/images":
		return "image_upload"
	case p == "/open-apis/im/v1/files":
		return "file_upload"
	case p == "/open-apis/im/v1/messages":
		return "create"
	case strings.HasPrefix(p, "/open-apis/im/v1/messages/") && strings.HasSuffix(p, "/reply"):
		return "reply"
	}
	return ""
}

// serveUpload answers im/v1/images and im/v1/files; false for any other
// route.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request, body []byte) bool {
	op := opOf(r)
	if op != "image_upload" && op != "file_upload" {
		return false
	}
	if !s.authorized(w, r) {
		return true
	}
	if f, ok := s.takeFailure(op); ok {
		writeFailure(w, f)
		return true
	}
	form, data, err := multipartOf(r.Header.Get("Content-Type"), body)
	if err != nil {
		writeJSON(w, 400, map[string]any{"code": 234001, "msg": "Invalid request param."})
		return true
	}
	u := uploaded{data: data}
	var answer string
	switch op {
	case "image_upload":
		if form["image_type"] != "message" || len(data) == 0 {
			writeJSON(w, 400, map[string]any{"code": 234001, "msg": "Invalid request param."})
			return true
		}
		if len(data) > MaxImageBytes {
			writeJSON(w, 400, map[string]any{"code": 234006, "msg": "The file size exceed the max value."})
			return true
		}
		answer = "image_key"
	case "file_upload":
		u.name, u.fileType = form["file_name"], form["file_type"]
		if !fileTypes[u.fileType] || u.name == "" || len(data) == 0 {
			writeJSON(w, 400, map[string]any{"code": 234001, "msg": "Invalid request param."})
			return true
		}
		if len(data) > MaxFileBytes {
			writeJSON(w, 400, map[string]any{"code": 234006, "msg": "The file size exceed the max value."})
			return true
		}
		answer = "file_key"
	}
	s.mu.Lock()
	if s.up.keys == nil {
		s.up.keys, s.up.made = map[string]uploaded{}, map[string]int{}
	}
	s.up.n++
	key := fmt.Sprintf("img_v3_fake_%d", s.up.n)
	if op == "file_upload" {
		key = fmt.Sprintf("file_v3_fake_%d", s.up.n)
	}
	s.up.keys[key] = u
	s.up.made[op]++
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"code": 0, "msg": "success", "data": map[string]any{answer: key}})
	return true
}

// multipartOf reads a multipart body: its fields, and the bytes of its
// image or file part.
func multipartOf(contentType string, body []byte) (map[string]string, []byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return nil, nil, fmt.Errorf("not multipart: %q", contentType)
	}
	mr := multipart.NewReader(bufio.NewReader(bytes.NewReader(body)), params["boundary"])
	fields, data := map[string]string{}, []byte(nil)
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return fields, data, nil
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(part)
		if err != nil {
			return nil, nil, err
		}
		if name := part.FormName(); name == "image" || name == "file" {
			data = b
		} else {
			fields[name] = string(b)
		}
	}
}

// knownKey reports whether a message's content names only keys the fake
// gave (an image or file message naming another is refused). s.mu is
// held.
func (s *Server) knownKey(msgType, content string) bool {
	key, _ := sentKey(msgType, content)
	if key == "" {
		return msgType != "image" && msgType != "file"
	}
	_, ok := s.up.keys[key]
	return ok
}
