package wechattest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Media out over iLink, as the protocol sends it:
//
//   - POST /ilink/bot/getuploadurl {filekey, media_type (1 image), to_user_id,
//     rawsize, rawfilemd5, filesize, no_need_thumb, aeskey (hex)} answers an
//     upload_param (or, from ForgeUploadURL, an upload_full_url);
//   - the bytes, encrypted with AES-128-ECB under aeskey, are POSTed to the
//     CDN: {cdn}/upload?encrypted_query_param=…&filekey=… (Media), which
//     answers the download's param in the x-encrypted-param header;
//   - sendmessage with an item of type 2: image_item.media
//     {encrypt_query_param, aes_key (base64 of the hex key), encrypt_type 1}.
//
// The CDN upload can fail: FailCDNUpload(statuses…) answers the next
// uploads with those statuses, and a status of -1 takes the bytes and then
// drops the connection unanswered.

// UploadRequest is one getuploadurl call.
type UploadRequest struct {
	FileKey   string `json:"filekey"`
	MediaType int    `json:"media_type"`
	To        string `json:"to_user_id"`
	RawSize   int    `json:"rawsize"`
	RawMD5    string `json:"rawfilemd5"`
	FileSize  int    `json:"filesize"`
	AESKey    string `json:"aeskey"`
}

// SentImage is an image item of a sendmessage.
type SentImage struct {
	Param   string // media.encrypt_query_param
	AESKey  []byte // from media.aes_key
	MidSize int
}

// ForgeUploadURL makes getuploadurl answer u as upload_full_url, as an
// impersonated API could.
func (f *ILink) ForgeUploadURL(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgedUpload = u
}

// UploadRequests lists the getuploadurl calls.
func (f *ILink) UploadRequests() []UploadRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]UploadRequest(nil), f.uploadReqs...)
}

func (f *ILink) getUploadURL(w http.ResponseWriter, body map[string]json.RawMessage) {
	raw, _ := json.Marshal(body)
	var req UploadRequest
	_ = json.Unmarshal(raw, &req)
	if req.FileKey == "" || req.To == "" || req.FileSize <= 0 || len(req.AESKey) != 32 {
		writeJSON(w, map[string]any{"ret": -1, "errmsg": "invalid param"})
		return
	}
	f.mu.Lock()
	f.uploadReqs = append(f.uploadReqs, req)
	forged := f.forgedUpload
	f.mu.Unlock()
	if forged != "" {
		writeJSON(w, map[string]any{"ret": 0, "upload_full_url": forged})
		return
	}
	writeJSON(w, map[string]any{"ret": 0, "upload_param": "up-" + req.FileKey})
}

// sentImages reads the image items of a sendmessage body.
func sentImages(body map[string]json.RawMessage) []SentImage {
	var msg struct {
		Items []struct {
			Type  int `json:"type"`
			Image *struct {
				Media struct {
					Param  string `json:"encrypt_query_param"`
					AESKey string `json:"aes_key"`
				} `json:"media"`
				MidSize int `json:"mid_size"`
			} `json:"image_item"`
		} `json:"item_list"`
	}
	_ = json.Unmarshal(body["msg"], &msg)
	var out []SentImage
	for _, it := range msg.Items {
		if it.Type != 2 || it.Image == nil {
			continue
		}
		hexKey, _ := base64.StdEncoding.DecodeString(it.Image.Media.AESKey)
		key, _ := hex.DecodeString(string(hexKey))
		out = append(out, SentImage{Param: it.Image.Media.Param, AESKey: key, MidSize: it.Image.MidSize})
	}
	return out
}

// FailCDNUpload answers the next CDN uploads with statuses, in order; -1
// takes the bytes and drops the connection unanswered.
func (m *Media) FailCDNUpload(statuses ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.uploadFails = append(m.uploadFails, statuses...)
}

// CDNUploads counts the CDN uploads that were stored.
func (m *Media) CDNUploads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.uploads
}

// CDNFile is the ciphertext stored under a download param, or nil.
func (m *Media) CDNFile(param string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files["cdn:"+param].body
}

// serveUpload takes a CDN upload; false for any other request.
func (m *Media) serveUpload(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/c2c/upload" {
		return false
	}
	q := r.URL.Query()
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if r.Method != http.MethodPost || err != nil || q.Get("encrypted_query_param") != "up-"+q.Get("filekey") || len(data)%16 != 0 || len(data) == 0 {
		w.Header().Set("x-error-message", "bad upload")
		w.WriteHeader(http.StatusBadRequest)
		return true
	}
	m.mu.Lock()
	status := 0
	if len(m.uploadFails) > 0 {
		status, m.uploadFails = m.uploadFails[0], m.uploadFails[1:]
	}
	param := "dl-" + q.Get("filekey")
	if status == 0 || status == -1 {
		m.files["cdn:"+param] = mediaFile{body: data}
		m.uploads++
	}
	m.mu.Unlock()
	switch status {
	case 0:
		w.Header().Set("x-encrypted-param", param)
		w.WriteHeader(http.StatusOK)
	case -1:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
	default:
		w.Header().Set("x-error-message", fmt.Sprintf("scripted %d", status))
		w.WriteHeader(status)
	}
	return true
}
