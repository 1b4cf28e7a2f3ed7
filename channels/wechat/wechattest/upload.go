package wechattest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// Temporary media uploads and the messages that show them, as the WeCom
// server API and the Official Account API take them:
//
//   - POST MediaUploadPath?access_token=…&type=KIND, multipart with the
//     file in the part "media" (its filename and Content-Type), answers
//     {"type", "media_id", "created_at"}: within each kind's limit (WeCom:
//     image ≤ 10 MB as JPG or PNG, file ≤ 20 MB, at least 5 bytes;
//     Official Account: image ≤ 10 MB, no "file" kind), else errcode
//     40005 (type) or 40006 (size);
//   - then an image or file message naming the media_id (WeCom
//     message/send and appchat/send, the Official Account's custom/send).
//
// WeCom's message/send with "enable_duplicate_check": 1 does not deliver
// a body it delivered within duplicate_check_interval seconds (default
// 1800): it answers ok, with the first message's msgid, and the call is
// recorded as a Duplicate.
//
// Each step can fail: Fail(path, …) as any call, and DropAnswer(path,
// nth) makes the nth call of path from now take effect and then close the
// connection unanswered.

// MediaUploadPath is the temporary-media upload both platforms serve.
const MediaUploadPath = "/cgi-bin/media/upload"

// Upload is one temporary media the fake took.
type Upload struct {
	MediaID  string
	Kind     string // the type query parameter
	Name     string // the part's filename
	Declared string // the part's Content-Type
	Type     string // sniffed from the bytes
	Data     []byte
}

// MediaMessage is one image or file message delivered, with the media it
// names.
type MediaMessage struct {
	Path    string // the send API it came through
	ToUser  string
	ChatID  string
	MsgType string // image or file
	MsgID   string
	Upload  // the media named
}

// uploadStore is an api's media, its media messages and dropped answers.
type uploadStore struct {
	media    map[string]Upload
	n        int
	messages []MediaMessage
	sent     map[string]dupEntry // body → first delivery, for the duplicate check
	drops    map[string][]int    // path → calls still to drop, counted from now
}

type dupEntry struct {
	at    time.Time
	msgID string
}

// Uploads lists the media the fake took, in order.
func (a *api) Uploads() []Upload {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Upload
	for i := 1; i <= a.up.n; i++ {
		if u, ok := a.up.media[fmt.Sprintf("media-%d", i)]; ok {
			out = append(out, u)
		}
	}
	return out
}

// MediaMessages lists the image and file messages delivered (duplicates
// not), in order.
func (a *api) MediaMessages() []MediaMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]MediaMessage(nil), a.up.messages...)
}

// DropAnswer makes the nth call of path from now (1: the next) take
// effect and then drop the connection unanswered.
func (a *api) DropAnswer(path string, nth int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.up.drops == nil {
		a.up.drops = map[string][]int{}
	}
	a.up.drops[path] = append(a.up.drops[path], nth)
}

// droppedHeader marks the call dropAnswer makes take effect.
const droppedHeader = "X-Wechattest-Dropped"

// dropAnswer serves a call scripted with DropAnswer; false for any other.
func (a *api) dropAnswer(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(droppedHeader) != "" {
		return false
	}
	a.mu.Lock()
	drop, left := false, []int(nil)
	for _, n := range a.up.drops[r.URL.Path] {
		switch {
		case n == 1:
			drop = true
		case n > 1:
			left = append(left, n-1)
		}
	}
	if len(a.up.drops[r.URL.Path]) > 0 {
		a.up.drops[r.URL.Path] = left
	}
	a.mu.Unlock()
	if !drop {
		return false
	}
	r.Header.Set(droppedHeader, "1")
	a.handle(httptest.NewRecorder(), r)
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
	return true
}

// uploadLimits are the kinds of temporary media a platform takes, with
// their limits in bytes and the types an image may be.
func (a *api) uploadLimits() map[string]int64 {
	if a.idParam == "corpid" { // WeCom
		return map[string]int64{"image": 10_000_000, "file": 20_000_000, "voice": 2_000_000, "video": 10_000_000}
	}
	return map[string]int64{"image": 10_000_000, "voice": 2_000_000, "video": 10_000_000, "thumb": 64_000}
}

// serveUpload is the media upload.
func (a *api) serveUpload(w http.ResponseWriter, r *http.Request) {
	c := Call{Path: r.URL.Path, Replica: r.Header.Get(ReplicaHeader), Token: r.URL.Query().Get("access_token")}
	a.mu.Lock()
	var f *Failure
	if fs := a.failures[c.Path]; len(fs) > 0 {
		f, a.failures[c.Path] = &fs[0], fs[1:]
	}
	if f != nil && f.Pass {
		f = nil
	}
	valid := a.token != "" && c.Token == a.token
	a.mu.Unlock()
	kind := r.URL.Query().Get("type")
	u, err := mediaPart(r)
	u.Kind = kind
	limit, known := a.uploadLimits()[kind]
	code, msg := 0, "ok"
	switch {
	case f != nil && f.Status != 0:
		c.Status = f.Status
	case f != nil:
		code, msg = f.Code, f.Msg
	case r.Method != http.MethodPost:
		c.Status = http.StatusMethodNotAllowed
	case !valid:
		code, msg = 42001, "access_token expired"
	case err != nil:
		code, msg = 41005, "media data missing"
	case !known:
		code, msg = 40004, "invalid media type"
	case int64(len(u.Data)) > limit:
		code, msg = 40006, "invalid file size"
	case len(u.Data) < 5:
		code, msg = 40006, "invalid file size"
	case kind == "image" && a.idParam == "corpid" && u.Type != "image/png" && u.Type != "image/jpeg":
		code, msg = 40005, "invalid file type"
	}
	out := map[string]any{"errcode": code, "errmsg": msg}
	if code == 0 && c.Status == 0 {
		a.mu.Lock()
		if a.up.media == nil {
			a.up.media = map[string]Upload{}
		}
		a.up.n++
		u.MediaID = fmt.Sprintf("media-%d", a.up.n)
		a.up.media[u.MediaID] = u
		a.mu.Unlock()
		out = map[string]any{"errcode": 0, "errmsg": "ok", "type": kind, "media_id": u.MediaID, "created_at": fmt.Sprint(time.Now().Unix())}
	}
	c.Code = code
	c.Body, _ = json.Marshal(map[string]any{"type": kind, "name": u.Name, "length": len(u.Data)})
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
	if c.Status != 0 {
		http.Error(w, http.StatusText(c.Status), c.Status)
		return
	}
	writeJSON(w, out)
}

// mediaPart reads the "media" part of an upload.
func mediaPart(r *http.Request) (Upload, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return Upload{}, fmt.Errorf("not multipart")
	}
	mr := multipart.NewReader(io.LimitReader(r.Body, 64<<20), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return Upload{}, err
		}
		if part.FormName() != "media" {
			continue
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return Upload{}, err
		}
		return Upload{Name: part.FileName(), Declared: part.Header.Get("Content-Type"), Type: http.DetectContentType(data), Data: data}, nil
	}
}

// mediaBody is what the fake reads of an image or file message.
type mediaBody struct {
	ToUser   string   `json:"touser"`
	ChatID   string   `json:"chatid"`
	MsgType  string   `json:"msgtype"`
	Image    mediaRef `json:"image"`
	File     mediaRef `json:"file"`
	Dup      int      `json:"enable_duplicate_check"`
	Interval int      `json:"duplicate_check_interval"`
}

// mediaRef is the media_id of an image or file message.
type mediaRef struct {
	MediaID string `json:"media_id"`
}

// sendMedia answers an image or file message; ok is false for any other
// message type. A media_id the fake never gave is errcode 40007.
func (a *api) sendMedia(c *Call) (code int, msg string, ok bool) {
	m := decode[mediaBody](c.Body)
	id := m.Image.MediaID
	if m.MsgType == "file" {
		id = m.File.MediaID
	}
	if m.MsgType != "image" && m.MsgType != "file" {
		return 0, "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u, known := a.up.media[id]
	if !known || u.Kind != m.MsgType {
		return 40007, "invalid media_id", true
	}
	body := string(bytes.TrimSpace(c.Body))
	if a.up.sent == nil {
		a.up.sent = map[string]dupEntry{}
	}
	interval := time.Duration(m.Interval) * time.Second
	if interval <= 0 {
		interval = 1800 * time.Second
	}
	if prev, seen := a.up.sent[c.Path+" "+body]; m.Dup == 1 && seen && time.Since(prev.at) < interval {
		c.Duplicate = true
		c.Answer = map[string]any{"msgid": prev.msgID}
		return 0, "ok", true
	}
	msgID := fmt.Sprintf("msg-%d", len(a.up.messages)+1)
	a.up.sent[c.Path+" "+body] = dupEntry{at: time.Now(), msgID: msgID}
	a.up.messages = append(a.up.messages, MediaMessage{Path: c.Path, ToUser: m.ToUser, ChatID: m.ChatID, MsgType: m.MsgType, MsgID: msgID, Upload: u})
	c.Answer = map[string]any{"msgid": msgID}
	return 0, "ok", true
}

// duplicateText answers a text message sent with the duplicate check
// that was delivered within its interval: ok, not delivered again.
func (a *api) duplicateText(c *Call) bool {
	m := decode[mediaBody](c.Body)
	if m.Dup != 1 || m.MsgType != "text" && m.MsgType != "markdown" {
		return false
	}
	interval := time.Duration(m.Interval) * time.Second
	if interval <= 0 {
		interval = 1800 * time.Second
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := c.Path + " " + strings.TrimSpace(string(c.Body))
	if a.up.sent == nil {
		a.up.sent = map[string]dupEntry{}
	}
	if prev, seen := a.up.sent[key]; seen && time.Since(prev.at) < interval {
		c.Duplicate = true
		return true
	}
	a.up.sent[key] = dupEntry{at: time.Now()}
	return false
}
