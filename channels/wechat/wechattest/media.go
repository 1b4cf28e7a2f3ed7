package wechattest

// A fake media host: WeCom AI-bot image and file addresses, iLink's CDN
// (GET /c2c/download?encrypted_query_param=…) and plain picture URLs, with
// the encryption each platform applies and the variants a download must
// survive.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Media behaviours beyond serving the bytes.
const (
	MediaForbidden = "forbidden" // 403
	MediaEndless   = "endless"   // streams until the client stops, no Content-Length
	MediaHuge      = "huge"      // announces 1 GiB, then streams
)

// Media is the fake media host.
type Media struct {
	srv *httptest.Server

	mu       sync.Mutex
	files    map[string]mediaFile // by path, or "cdn:" + encrypted_query_param
	requests int
	served   int64
	// CDN uploads (ilink_upload.go).
	uploads     int
	uploadFails []int
}

type mediaFile struct {
	body      []byte
	mime      string
	behaviour string
	location  string // a redirect's target
}

// NewMedia starts the host; it stops at cleanup.
func NewMedia(t testing.TB) *Media {
	m := &Media{files: map[string]mediaFile{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		m.srv.CloseClientConnections()
		m.srv.Close()
	})
	return m
}

// URL is the host's base, http://127.0.0.1:port.
func (m *Media) URL() string { return m.srv.URL }

// CDNURL is the iLink CDN base on this host (WECHAT_ILINK_CDN_URL).
func (m *Media) CDNURL() string { return m.srv.URL + "/c2c" }

// Add serves body at path (as mime; a query in path is part of the URL
// returned, not of the match) and returns its full URL.
func (m *Media) Add(path string, body []byte, mime string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, _, _ := strings.Cut(path, "?")
	m.files[p] = mediaFile{body: body, mime: mime}
	return m.srv.URL + path
}

// AddBehaviour makes path misbehave and returns its URL.
func (m *Media) AddBehaviour(path, behaviour string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, _, _ := strings.Cut(path, "?")
	m.files[p] = mediaFile{behaviour: behaviour}
	return m.srv.URL + path
}

// AddRedirect makes path answer 302 to target and returns its URL.
func (m *Media) AddRedirect(path, target string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = mediaFile{location: target}
	return m.srv.URL + path
}

// AddCDN serves body as iLink's CDN download of param.
func (m *Media) AddCDN(param string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files["cdn:"+param] = mediaFile{body: body}
}

// AddCDNBehaviour makes the CDN download of param misbehave.
func (m *Media) AddCDNBehaviour(param, behaviour string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files["cdn:"+param] = mediaFile{behaviour: behaviour}
}

// Requests counts the downloads asked for.
func (m *Media) Requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// BytesServed counts the body bytes written.
func (m *Media) BytesServed() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served
}

func (m *Media) serve(w http.ResponseWriter, r *http.Request) {
	if m.serveUpload(w, r) { // ilink_upload.go
		return
	}
	key := r.URL.Path
	if r.URL.Path == "/c2c/download" {
		key = "cdn:" + r.URL.Query().Get("encrypted_query_param")
	}
	m.mu.Lock()
	m.requests++
	f, ok := m.files[key]
	m.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if f.location != "" {
		http.Redirect(w, r, f.location, http.StatusFound)
		return
	}
	switch f.behaviour {
	case MediaForbidden:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"))
		return
	case MediaEndless, MediaHuge:
		if f.behaviour == MediaHuge {
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		}
		w.WriteHeader(http.StatusOK)
		// A PNG's signature, then zeros for ever: past a type sniff, only
		// the size limit stops it.
		chunk := make([]byte, 32<<10)
		copy(chunk, "\x89PNG\r\n\x1a\n")
		for {
			n, err := w.Write(chunk)
			m.mu.Lock()
			m.served += int64(n)
			m.mu.Unlock()
			if err != nil || r.Context().Err() != nil {
				return
			}
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
		}
	}
	if f.mime == "" {
		f.mime = "application/octet-stream"
	}
	w.Header().Set("Content-Type", f.mime)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.body)))
	n, _ := w.Write(f.body)
	m.mu.Lock()
	m.served += int64(n)
	m.mu.Unlock()
}

// WeComMediaKey is a media aeskey as WeCom sends it: base64 of 32 bytes
// (here derived from seed), without its padding.
func WeComMediaKey(seed byte) string {
	key := bytes.Repeat([]byte{seed}, 32)
	for i := range key {
		key[i] += byte(i * 7)
	}
	return base64.RawStdEncoding.EncodeToString(key)
}

// EncryptWeCom encrypts plain the way WeCom encrypts media: AES-256-CBC
// under the decoded aeskey, IV its first 16 bytes, PKCS#7 padding to a
// multiple of 32. (Written apart from the channel's code, so the two
// check each other.)
func EncryptWeCom(plain []byte, aeskey string) []byte {
	key, err := base64.RawStdEncoding.DecodeString(aeskey)
	if err != nil {
		panic(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	pad := 32 - len(plain)%32
	data := append(append([]byte(nil), plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, len(data))
	cipher.NewCBCEncrypter(block, key[:16]).CryptBlocks(out, data)
	return out
}

// EncryptILink encrypts plain the way iLink's CDN stores media:
// AES-128-ECB with PKCS#7 padding.
func EncryptILink(plain, key []byte) []byte {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	pad := 16 - len(plain)%16
	data := append(append([]byte(nil), plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, len(data))
	for i := 0; i < len(data); i += 16 {
		block.Encrypt(out[i:i+16], data[i:i+16])
	}
	return out
}

// MediaGetPath is the temporary-media download both WeCom apps and
// Official Accounts have.
const MediaGetPath = "/cgi-bin/media/get"

// AddMedia makes media/get serve body (as mime) for mediaID.
func (a *api) AddMedia(mediaID string, body []byte, mime string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.media == nil {
		a.media = map[string]mediaFile{}
	}
	a.media[mediaID] = mediaFile{body: body, mime: mime}
}

// AddMediaBehaviour makes media/get of mediaID misbehave (MediaForbidden
// answers 403, MediaEndless and MediaHuge stream).
func (a *api) AddMediaBehaviour(mediaID, behaviour string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.media == nil {
		a.media = map[string]mediaFile{}
	}
	a.media[mediaID] = mediaFile{behaviour: behaviour}
}

// AddMediaRedirect makes media/get of mediaID answer 302 to target.
func (a *api) AddMediaRedirect(mediaID, target string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.media == nil {
		a.media = map[string]mediaFile{}
	}
	a.media[mediaID] = mediaFile{location: target}
}

// MediaCalls counts media/get requests.
func (a *api) MediaCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mediaCalls
}

// serveMedia answers media/get as the platforms do: the file, or a JSON
// errcode (42001 for a stale token, 40007 for an unknown media_id).
func (a *api) serveMedia(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.mediaCalls++
	valid := a.token != "" && q.Get("access_token") == a.token
	f, ok := a.media[q.Get("media_id")]
	a.mu.Unlock()
	switch {
	case !valid:
		writeJSON(w, map[string]any{"errcode": 42001, "errmsg": "access_token expired"})
		return
	case !ok:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(`{"errcode":40007,"errmsg":"invalid media_id"}`))
		return
	}
	m := &Media{files: map[string]mediaFile{"x": f}}
	r.URL.Path = "x"
	m.serve(w, r)
	a.mu.Lock()
	a.mediaServed += m.served
	a.mu.Unlock()
}

// MediaBytesServed counts the media/get body bytes written.
func (a *api) MediaBytesServed() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mediaServed
}
