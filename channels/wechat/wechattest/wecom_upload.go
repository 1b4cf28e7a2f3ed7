package wechattest

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// Media out over a WeCom AI bot's long connection, as WeCom takes it:
//
//   - aibot_upload_media_init {type (image, file, voice, video), filename,
//     total_size, total_chunks (≤ 100), md5} answers body.upload_id;
//   - aibot_upload_media_chunk {upload_id, chunk_index, base64_data} per
//     chunk (≤ 512 KiB);
//   - aibot_upload_media_finish {upload_id} answers body.media_id once
//     every chunk came and the bytes match the md5;
//   - aibot_send_msg {chatid, msgtype image|file, image|file {media_id}}.
//
// FailUploadFrames(cmd, errcodes…) answers the next frames of cmd with
// those errcodes (0 lets one through).

// WeComMedia is one media message an AI bot sent, with its bytes.
type WeComMedia struct {
	ChatID   string
	MsgType  string
	Kind     string // the type the upload was made as
	Filename string
	Data     []byte
}

type wecomUpload struct {
	kind, filename, md5 string
	size, chunks        int
	parts               map[int][]byte
}

// wecomUploads is the fake's uploads in progress and media.
type wecomUploads struct {
	pending map[string]*wecomUpload
	media   map[string]WeComMedia
	sent    []WeComMedia
	fails   map[string][]int
	n       int
}

// FailUploadFrames answers the next frames of cmd (an upload command or
// aibot_send_msg) with errcodes, in order.
func (f *WeCom) FailUploadFrames(cmd string, errcodes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.up.fails == nil {
		f.up.fails = map[string][]int{}
	}
	f.up.fails[cmd] = append(f.up.fails[cmd], errcodes...)
}

// MediaSent lists the image and file messages sent, in order.
func (f *WeCom) MediaSent() []WeComMedia {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]WeComMedia(nil), f.up.sent...)
}

// uploadFrame answers the upload commands and aibot_send_msg of media;
// false for any other frame. f.mu is held.
func (f *WeCom) uploadFrame(fr Frame, ack map[string]any) bool {
	media := false
	switch fr.Cmd {
	case "aibot_upload_media_init", "aibot_upload_media_chunk", "aibot_upload_media_finish":
		media = true
	case "aibot_send_msg":
		var b struct{ MsgType string }
		_ = json.Unmarshal(fr.Body, &b)
		media = b.MsgType == "image" || b.MsgType == "file"
	default:
		return false
	}
	u := &f.up
	if u.pending == nil {
		u.pending, u.media = map[string]*wecomUpload{}, map[string]WeComMedia{}
	}
	if fs := u.fails[fr.Cmd]; len(fs) > 0 {
		u.fails[fr.Cmd] = fs[1:]
		if fs[0] != 0 { // 0 lets the frame through
			ack["errcode"], ack["errmsg"] = fs[0], "scripted failure"
			return true
		}
	}
	if !media {
		return false
	}
	code, msg, body := f.mediaCommand(fr)
	ack["errcode"], ack["errmsg"] = code, msg
	if body != nil && code == 0 {
		ack["body"] = body
	}
	return true
}

// mediaCommand does one media command. f.mu is held.
func (f *WeCom) mediaCommand(fr Frame) (int, string, map[string]any) {
	u := &f.up
	var b struct {
		Type, Filename, MD5 string
		TotalSize           int    `json:"total_size"`
		TotalChunks         int    `json:"total_chunks"`
		UploadID            string `json:"upload_id"`
		ChunkIndex          int    `json:"chunk_index"`
		Data                string `json:"base64_data"`
		ChatID              string `json:"chatid"`
		MsgType             string `json:"msgtype"`
		Image, File         struct {
			MediaID string `json:"media_id"`
		}
	}
	_ = json.Unmarshal(fr.Body, &b)
	switch fr.Cmd {
	case "aibot_upload_media_init":
		if b.TotalSize < 5 || b.TotalChunks < 1 || b.TotalChunks > 100 || b.Filename == "" || len(b.MD5) != 32 {
			return 40006, "invalid upload", nil
		}
		u.n++
		id := fmt.Sprintf("upload-%d", u.n)
		u.pending[id] = &wecomUpload{kind: b.Type, filename: b.Filename, md5: b.MD5, size: b.TotalSize, chunks: b.TotalChunks, parts: map[int][]byte{}}
		return 0, "ok", map[string]any{"upload_id": id}
	case "aibot_upload_media_chunk":
		p, ok := u.pending[b.UploadID]
		data, err := base64.StdEncoding.DecodeString(b.Data)
		if !ok || err != nil || b.ChunkIndex < 0 || b.ChunkIndex >= p.chunks || len(data) > 512<<10 {
			return 40006, "invalid chunk", nil
		}
		p.parts[b.ChunkIndex] = data
		return 0, "ok", nil
	case "aibot_upload_media_finish":
		p, ok := u.pending[b.UploadID]
		if !ok || len(p.parts) != p.chunks {
			return 40006, "upload incomplete", nil
		}
		var all []byte
		for i := range p.chunks {
			all = append(all, p.parts[i]...)
		}
		sum := md5.Sum(all)
		if len(all) != p.size || hex.EncodeToString(sum[:]) != p.md5 {
			return 40006, "md5 mismatch", nil
		}
		delete(u.pending, b.UploadID)
		u.n++
		id := fmt.Sprintf("wecom-media-%d", u.n)
		u.media[id] = WeComMedia{Kind: p.kind, Filename: p.filename, Data: all, MsgType: http.DetectContentType(all)}
		return 0, "ok", map[string]any{"media_id": id, "type": p.kind}
	}
	id := b.Image.MediaID
	if b.MsgType == "file" {
		id = b.File.MediaID
	}
	m, ok := u.media[id]
	if !ok || b.ChatID == "" {
		return 40007, "invalid media_id", nil
	}
	m.ChatID, m.MsgType = b.ChatID, b.MsgType
	u.sent = append(u.sent, m)
	return 0, "ok", nil
}
