package feishu

import (
	"context"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// TestEditRedrawsTheCardOrEditsTheText: a post (a shared card) is edited
// by redrawing the card; one that went out as text, where the card was
// refused, by editing the text; a message that is gone or someone else's
// is refused for good, a rate limit for now.
func TestEditRedrawsTheCardOrEditsTheText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	m := channels.Message{Channel: Name, Chat: "oc_group"}
	part := func(text string) string { return f.ch.Parts(m, channels.Reply{Text: text})[0] }
	card, err := f.ch.Post(ctx, m, part("🔥 **[FIRING:1] DiskFull**"))
	if err != nil {
		t.Fatal(err)
	}
	f.api.RefuseCards(true)
	text, err := f.ch.Post(ctx, m, part("🔥 **[FIRING:1] CPU**"))
	if err != nil {
		t.Fatal(err)
	}
	f.api.RefuseCards(false)
	if err := f.ch.Edit(ctx, m, card, part("✅ **[RESOLVED:1] DiskFull**")); err != nil {
		t.Fatalf("Edit of the card = %v", err)
	}
	if err := f.ch.Edit(ctx, m, text, part("✅ **[RESOLVED:1] CPU**")); err != nil {
		t.Fatalf("Edit of the text = %v", err)
	}
	edits := f.api.Edits()
	if len(edits) != 2 || edits[0].Op != feishutest.OpPatch || edits[0].MessageID != card || edits[0].Content != "✅ **[RESOLVED:1] DiskFull**" ||
		edits[1].Op != feishutest.OpEdit || edits[1].MessageID != text || edits[1].Content != "✅ **[RESOLVED:1] CPU**" {
		t.Fatalf("edits %+v; want the card redrawn, then the text edited", edits)
	}
	for _, v := range f.api.Visible() {
		if v.MessageID == card && v.Text != "✅ **[RESOLVED:1] DiskFull**" || v.MessageID == text && v.Text != "✅ **[RESOLVED:1] CPU**" {
			t.Errorf("message %s shows %q", v.MessageID, v.Text)
		}
	}

	theirs := f.api.Say("oc_group", "", "ou_a", "a person's message")
	f.api.Fail(feishutest.OpPatch, feishutest.Failure{Code: 230020, Msg: "rate limited"})
	cases := []struct {
		name  string
		id    string
		retry bool
	}{
		{"rate limited", card, true},
		{"someone else's message", theirs.ID, false},
		{"a message that is gone", "om_never_sent", false},
	}
	for _, c := range cases {
		err := f.ch.Edit(ctx, m, c.id, part("✅ again"))
		if again, _ := channels.Retryable(err); err == nil || again != c.retry {
			t.Errorf("%s: Edit = %v (retry %v); want retry %v", c.name, err, again, c.retry)
		}
	}
	if n := len(f.api.Edits()); n != 2 {
		t.Errorf("%d edits took effect; want the first two only", n)
	}
	if err := f.ch.Edit(ctx, m, card, "not a part"); err == nil {
		t.Error("Edit of something that is not a part succeeded")
	}
}
