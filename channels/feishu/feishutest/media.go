package feishutest

// The message-resource API: GET /open-apis/im/v1/messages/:message_id/
// resources/:file_key?type=image|file serves what a test put there, with
// the variants a download must survive.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Resource behaviours beyond serving the bytes.
const (
	// ResourceForbidden answers 403 with Feishu's JSON envelope (the bot
	// may not read the message's resources).
	ResourceForbidden = "forbidden"
	// ResourceEndless streams bytes until the client stops reading, with
	// no Content-Length.
	ResourceEndless = "endless"
	// ResourceHuge announces a Content-Length of 1 GiB and streams until
	// the client stops reading.
	ResourceHuge = "huge"
)

type resource struct {
	messageID, key string
	data           []byte
	behaviour      string
	mime           string
	location       string // a redirect's target
}

// media is the fake's resource store and counters.
type media struct {
	resources map[string]resource // by message_id + "/" + key
	requests  int
	served    int64 // bytes written by resource answers
	types     []string
}

// AddResource makes GET …/messages/messageID/resources/key serve data (as
// contentType; default application/octet-stream).
func (s *Server) AddResource(messageID, key string, data []byte, contentType string) {
	s.addResource(resource{messageID: messageID, key: key, data: data, mime: contentType})
}

// AddResourceBehaviour makes the resource misbehave: ResourceForbidden,
// ResourceEndless or ResourceHuge.
func (s *Server) AddResourceBehaviour(messageID, key, behaviour string) {
	s.addResource(resource{messageID: messageID, key: key, behaviour: behaviour})
}

func (s *Server) addResource(r resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.media.resources == nil {
		s.media.resources = map[string]resource{}
	}
	s.media.resources[r.messageID+"/"+r.key] = r
}

// AddResourceRedirect makes the resource answer 302 to target.
func (s *Server) AddResourceRedirect(messageID, key, target string) {
	s.addResource(resource{messageID: messageID, key: key, location: target})
}

// ResourceRequests counts resource downloads asked for (refused ones
// included).
func (s *Server) ResourceRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media.requests
}

// ResourceTypes lists the type parameter of each resource request.
func (s *Server) ResourceTypes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.media.types...)
}

// ResourceBytesServed counts the body bytes the resource answers wrote
// (what the client read, give or take the connection's buffers).
func (s *Server) ResourceBytesServed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media.served
}

// isResource reports whether path is a message-resource request.
func isResource(method, path string) bool {
	return method == http.MethodGet && strings.HasPrefix(path, "/open-apis/im/v1/messages/") && strings.Contains(path, "/resources/")
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/open-apis/im/v1/messages/")
	messageID, key, _ := strings.Cut(rest, "/resources/")
	typ := r.URL.Query().Get("type")
	s.mu.Lock()
	s.media.requests++
	s.media.types = append(s.media.types, typ)
	res, ok := s.media.resources[messageID+"/"+key]
	s.mu.Unlock()
	if !s.authorized(w, r) {
		return
	}
	if typ != "image" && typ != "file" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 234001, "msg": "Invalid request param: type"})
		return
	}
	if !ok || strings.Contains(key, "/") {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 234003, "msg": "File not in msg.", "error": map[string]string{"log_id": "fake-resource-log"}})
		return
	}
	if res.location != "" {
		http.Redirect(w, r, res.location, http.StatusFound)
		return
	}
	switch res.behaviour {
	case ResourceForbidden:
		writeJSON(w, http.StatusForbidden, map[string]any{"code": 234002, "msg": "Bot has no permission to read the message's resource.", "error": map[string]string{"log_id": "fake-resource-log"}})
		return
	case ResourceEndless, ResourceHuge:
		w.Header().Set("Content-Type", "image/png")
		if res.behaviour == ResourceHuge {
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		}
		w.WriteHeader(http.StatusOK)
		// A PNG's signature, then zeros for ever: past a type sniff, only
		// the size limit stops it.
		chunk := make([]byte, 32<<10)
		copy(chunk, "\x89PNG\r\n\x1a\n")
		for {
			n, err := w.Write(chunk)
			s.mu.Lock()
			s.media.served += int64(n)
			s.mu.Unlock()
			if err != nil || r.Context().Err() != nil {
				return
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
	ct := res.mime
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(res.data)))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", key))
	w.WriteHeader(http.StatusOK)
	n, _ := w.Write(res.data)
	s.mu.Lock()
	s.media.served += int64(n)
	s.mu.Unlock()
}

// ImageContent is the content of an image message.
func ImageContent(imageKey string) string {
	b, _ := json.Marshal(map[string]string{"image_key": imageKey})
	return string(b)
}

// FileContent is the content of a file message.
func FileContent(fileKey, fileName string) string {
	b, _ := json.Marshal(map[string]string{"file_key": fileKey, "file_name": fileName})
	return string(b)
}

// PostContent is the content of a received post: one paragraph with text,
// then one paragraph per image.
func PostContent(title, text string, imageKeys ...string) string {
	content := [][]map[string]string{{{"tag": "text", "text": text}}}
	for _, k := range imageKeys {
		content = append(content, []map[string]string{{"tag": "img", "image_key": k, "width": "800", "height": "600"}})
	}
	b, _ := json.Marshal(map[string]any{"title": title, "content": content})
	return string(b)
}
