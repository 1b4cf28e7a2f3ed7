package agent

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

var pngRef = []sessions.Attachment{{Kind: "image", ID: "F1", Name: "a.png", MIME: "image/png", SHA256: "abc"}}

// parts returns the image URLs of the last user message of req, and its
// text.
func userParts(req openai.ChatCompletionRequest, nth int) (text string, urls []string) {
	k := 0
	for _, m := range req.Messages {
		if m.Role != openai.ChatMessageRoleUser {
			continue
		}
		if k++; k != nth {
			continue
		}
		if len(m.MultiContent) == 0 {
			return m.Content, nil
		}
		for _, p := range m.MultiContent {
			switch p.Type {
			case openai.ChatMessagePartTypeText:
				text += p.Text
			case openai.ChatMessagePartTypeImageURL:
				urls = append(urls, p.ImageURL.URL)
			}
		}
	}
	return text, urls
}

func TestImagesGoAsPartsToAVisionModel(t *testing.T) {
	h := newHarness(t, Config{Vision: true}, nil)
	h.srv.Script(openaitest.Text("a cat"))
	res := h.run(t, TurnRequest{UserText: "what is this?\n[image: a.png]", Attachments: pngRef, Images: []string{"data:image/png;base64,AAAA"}})
	text, urls := userParts(h.srv.Requests()[0], 1)
	if text != "what is this?\n[image: a.png]" || len(urls) != 1 || urls[0] != "data:image/png;base64,AAAA" {
		t.Fatalf("user message = %q %q", text, urls)
	}
	// Stored: the reference, not the bytes.
	if u := res.Messages[0]; len(u.Attachments) != 1 || u.Attachments[0].ID != "F1" || strings.Contains(u.Content, "base64") {
		t.Errorf("stored user message = %+v", u)
	}
}

func TestImagesOmittedForAModelWithoutVision(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Text("no idea"))
	h.run(t, TurnRequest{UserText: "what is this?", Attachments: pngRef, Images: []string{"data:image/png;base64,AAAA"}})
	raw := string(h.srv.RawRequests()[0])
	if strings.Contains(raw, "image_url") || strings.Contains(raw, "AAAA") {
		t.Fatalf("a model without vision was sent the image: %s", raw)
	}
	if text, _ := userParts(h.srv.Requests()[0], 1); text != "what is this?\n"+NoVisionNote {
		t.Errorf("user message = %q", text)
	}
}

func TestHistoryImagesResentOnlyWhereAsked(t *testing.T) {
	h := newHarness(t, Config{Vision: true}, nil)
	h.srv.Script(openaitest.Text("ok"))
	hist := stored(t,
		sessions.Message{Role: "user", Content: "first [image: a.png]", Attachments: pngRef},
		sessions.Message{Role: "assistant", Content: "a cat"},
		sessions.Message{Role: "user", Content: "second [image: b.png]", Attachments: pngRef},
		sessions.Message{Role: "assistant", Content: "a dog"},
	)
	h.run(t, TurnRequest{History: hist, UserText: "compare", HistoryImages: map[int][]string{2: {"data:image/png;base64,BBBB"}}})
	req := h.srv.Requests()[0]
	if text, urls := userParts(req, 1); text != "first [image: a.png]" || urls != nil {
		t.Errorf("first = %q %q", text, urls)
	}
	if text, urls := userParts(req, 2); text != "second [image: b.png]" || len(urls) != 1 || urls[0] != "data:image/png;base64,BBBB" {
		t.Errorf("second = %q %q", text, urls)
	}
}
