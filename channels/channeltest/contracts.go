package channeltest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// contract is the check Run makes of an adapter that declares one
// capability, beyond declaring exactly what it implements.
type contract struct {
	what string // the subtest's name, after the capability's
	run  func(t *testing.T, s Subject)
}

// contracts holds one check for every entry of channels.CapabilityTable;
// TestEveryCapabilityHasAContract fails for an entry without one, so that
// no capability is added without its check.
var contracts = map[Capability]contract{
	Runner:            {"Run returns nil and leaves no goroutine after cancel", checkRunStops},
	Health:            {"Ready shows no credential", checkHealth},
	Typing:            {"StartTyping returns a stop that can be called twice", checkTyping},
	HTTPChannel:       {"Mount registers on a fresh mux", checkMount},
	Poster:            {"Parts cuts a reply into non-empty posts at a sane pace", checkPoster},
	KeyedPoster:       {"a post asked for again with its key is found, not made twice", checkKeyedPoster},
	PosterFor:         {"a PosterFor is a Poster", checkPosterFor},
	Streamer:          {"StartReply's sink can be discarded", checkStreamer},
	LiveAdopter:       {"AdoptReply refuses a reference it never made", checkLiveAdopter},
	Prompter:          {"SendPrompt posts an approval prompt", checkPrompter},
	Awaited:           {"AwaitsEveryReply is only declared by a local adapter", checkAwaited},
	Unanswered:        {"LeftUnanswered of a message nobody waits for posts nothing", checkUnanswered},
	AttachmentFetcher: {"FetchAttachment refuses an attachment that names nothing", checkFetcher},
	PostCounter:       {"Posts counts a short reply as one post", checkPostCounter},
	Addresser:         {"Address keeps the destination and makes a post there and in its thread", checkAddresser},
	RoomReader:        {"ReadRoom reads the newest Max of a thread oldest first, and nothing again from its cursor", checkRoomReader},
	Editor:            {"Edit rewrites a post it made, and refuses one it never made for good", checkEditor},
	Uploader:          {"Upload sends a small image once, and finds it again by its key", checkUploader},
}

func contextFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

func checkHealth(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if err := channels.CapabilitiesOf(ch).Health.Ready(); err != nil {
		noSecret(t, s, "Ready()", err.Error())
	}
}

func checkTyping(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	stop := channels.CapabilitiesOf(ch).Typing.StartTyping(contextFor(t), s.Message)
	if stop == nil {
		t.Fatal("StartTyping returned a nil stop")
	}
	stop()
	stop()
}

func checkMount(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	mux := http.NewServeMux()
	channels.CapabilitiesOf(ch).HTTP.Mount(mux)
}

func checkPoster(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	p := channels.CapabilitiesOf(ch).Poster
	parts := p.Parts(s.Message, channels.Reply{Text: "contract: one short reply"})
	if len(parts) == 0 {
		t.Fatal("Parts of a short reply is empty")
	}
	for i, part := range parts {
		if part == "" {
			t.Errorf("part %d of %d is empty", i, len(parts))
		}
	}
	if pace := p.Pace(); pace.Every < 0 || pace.Burst < 0 {
		t.Errorf("Pace() = %+v; want no negative figure", pace)
	}
}

func checkPosterFor(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	c := channels.CapabilitiesOf(ch)
	if c.Poster == nil {
		t.Fatalf("%T implements channels.PosterFor but not channels.Poster", ch)
	}
	c.PosterFor.PostsFor(s.Message)
}

func checkStreamer(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	ctx := contextFor(t)
	sink, err := channels.CapabilitiesOf(ch).Streamer.StartReply(ctx, s.Message)
	if err != nil {
		noSecret(t, s, "StartReply's error", err.Error())
		return
	}
	if sink == nil {
		return // this reply is not streamed: allowed
	}
	if err := sink.Discard(ctx); err != nil {
		noSecret(t, s, "Discard's error", err.Error())
		t.Errorf("Discard of a sink that showed nothing = %v", err)
	}
}

// checkLiveAdopter: a recorded reference is read back from Redis, so a
// corrupt or forged one must be refused, not acted on (no message of
// another chat edited or deleted).
func checkLiveAdopter(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	a := channels.CapabilitiesOf(ch).LiveAdopter
	for _, ref := range []string{"", "not a reference", `{"chat":"elsewhere"}`, strings.Repeat("{", 1<<16)} {
		sink, err := a.AdoptReply(contextFor(t), s.Message, ref)
		if err == nil {
			t.Errorf("AdoptReply(%.40q) = %v; want it refused", ref, sink)
			continue
		}
		noSecret(t, s, "AdoptReply's error", err.Error())
	}
}

func checkPrompter(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	_, err := channels.CapabilitiesOf(ch).Prompter.SendPrompt(contextFor(t), s.Message, channels.Reply{
		Notice: true, Text: "contract: approve `/approve ABC`",
		Approval: &channels.Approval{ID: "contract-id", Code: "ABC", Tool: "contract_tool", Args: "{}"},
	})
	if err != nil {
		noSecret(t, s, "SendPrompt's error", err.Error())
		t.Errorf("SendPrompt = %v; want the prompt posted", err)
	}
}

func checkAwaited(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if !s.Local {
		// The gateway answers every message of such an adapter, refusals
		// included: only a sender at a local prompt waits like that.
		t.Errorf("%T awaits every reply but has a platform behind it (Subject.Local is false)", ch)
	}
	channels.CapabilitiesOf(ch).Awaited.AwaitsEveryReply()
}

func checkFetcher(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	rc, err := channels.CapabilitiesOf(ch).AttachmentFetcher.FetchAttachment(contextFor(t), s.Message, channels.Attachment{}, 1<<10)
	if err == nil {
		rc.Close()
		t.Fatal("FetchAttachment of an attachment that names nothing succeeded")
	}
	noSecret(t, s, "FetchAttachment's error", err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("FetchAttachment waited for the test's deadline: %v", err)
	}
}

func checkKeyedPoster(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	p := channels.CapabilitiesOf(ch).KeyedPoster
	ctx := contextFor(t)
	first, err := p.PostKeyed(ctx, s.Message, "contract: one keyed post", "contract-key.0", false)
	if err != nil {
		t.Fatalf("PostKeyed: %v", err)
	}
	again, err := p.PostKeyed(ctx, s.Message, "contract: one keyed post", "contract-key.0", true)
	if err != nil {
		t.Fatalf("PostKeyed again: %v", err)
	}
	if first == "" || again != first {
		t.Errorf("PostKeyed again gave id %q; want the first post's %q", again, first)
	}
}

func checkUnanswered(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	before := 0
	if s.SendAttempts != nil {
		before = s.SendAttempts()
	}
	// No request waits for s.Message: there is nothing to end, and
	// nothing reaches the platform.
	channels.CapabilitiesOf(ch).Unanswered.LeftUnanswered(contextFor(t), s.Message)
	if s.SendAttempts != nil && s.SendAttempts() != before {
		t.Errorf("LeftUnanswered sent %d messages; want none", s.SendAttempts()-before)
	}
}

func checkPostCounter(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	if n := channels.CapabilitiesOf(ch).PostCounter.Posts(s.Message, "contract: one short reply"); n != 1 {
		t.Errorf("Posts of a short reply = %d; want 1", n)
	}
}

func checkRoomReader(t *testing.T, s Subject) {
	if s.Room == nil {
		t.Fatal("channeltest: a RoomReader needs Subject.Room")
	}
	ch, _ := build(t, s)
	r := channels.CapabilitiesOf(ch).RoomReader
	ctx := contextFor(t)
	asked := s.Room(t)
	room, err := r.ReadRoom(ctx, channels.RoomQuery{Message: asked, Max: 50})
	if err != nil || len(room.Messages) != 0 {
		t.Errorf("ReadRoom asking for neither the thread nor recent messages = %d messages, %v; want nothing", len(room.Messages), err)
	}
	all, err := r.ReadRoom(ctx, channels.RoomQuery{Message: asked, Thread: true, Max: 50})
	if err != nil {
		noSecret(t, s, "ReadRoom's error", err.Error())
		t.Fatalf("ReadRoom of the thread = %v", err)
	}
	if len(all.Messages) != 3 || all.Cursor == "" {
		t.Fatalf("ReadRoom of a thread of three = %d messages, cursor %q; want the three (not the message asking) and a cursor",
			len(all.Messages), all.Cursor)
	}
	for i, m := range all.Messages {
		if m.ID == "" || m.Author == "" || m.Text == "" || m.Time.IsZero() || m.Bot {
			t.Errorf("message %d = %+v; want its id, author, text and time, not the bot's", i, m)
		}
		if i > 0 && m.Time.Before(all.Messages[i-1].Time) {
			t.Errorf("message %d is older than the one before it", i)
		}
	}
	room, err = r.ReadRoom(ctx, channels.RoomQuery{Message: asked, Thread: true, Max: 2})
	if err != nil || len(room.Messages) != 2 || room.Messages[0].ID != all.Messages[1].ID || room.Messages[1].ID != all.Messages[2].ID {
		t.Errorf("ReadRoom with Max 2 = %+v, %v; want the newest two, oldest first", room.Messages, err)
	}
	again, err := r.ReadRoom(ctx, channels.RoomQuery{Message: asked, Thread: true, Since: all.Cursor, Max: 50})
	if err != nil || len(again.Messages) != 0 {
		t.Errorf("ReadRoom again from its cursor = %d messages, %v; want nothing new", len(again.Messages), err)
	}
}

// checkEditor: an Editor is a Poster (it edits what Post made); editing a
// post twice to one text is harmless; and an id the platform never gave
// is refused as a failure another attempt cannot mend, revealing nothing.
func checkEditor(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	c := channels.CapabilitiesOf(ch)
	if c.Poster == nil {
		t.Fatalf("%T implements channels.Editor but not channels.Poster", ch)
	}
	ctx := contextFor(t)
	id, err := c.Poster.Post(ctx, s.Message, c.Poster.Parts(s.Message, channels.Reply{Text: "contract: a post to edit"})[0])
	if err != nil || id == "" {
		t.Fatalf("Post = %q, %v; want the id of the post made", id, err)
	}
	edited := c.Poster.Parts(s.Message, channels.Reply{Text: "contract: the post, edited"})[0]
	for i := range 2 {
		if err := c.Editor.Edit(ctx, s.Message, id, edited); err != nil {
			noSecret(t, s, "Edit's error", err.Error())
			t.Fatalf("Edit %d of a post the adapter made = %v", i+1, err)
		}
	}
	err = c.Editor.Edit(ctx, s.Message, "contract-never-posted", edited)
	if err == nil {
		t.Fatal("Edit of an id the platform never gave succeeded")
	}
	noSecret(t, s, "Edit's error", err.Error())
	if again, _ := channels.Retryable(err); again {
		t.Errorf("Edit of an id the platform never gave = %v; want a failure another attempt cannot mend", err)
	}
}

// checkAddresser: work addressed to the chat of s.Message (and then to the
// thread of what was posted there) keeps its destination, and a Poster
// posts it: the first as a post to the chat, the second in its thread.
func checkAddresser(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	c := channels.CapabilitiesOf(ch)
	root := channels.Message{ID: "work:contract", Channel: s.Message.Channel, Workspace: s.Message.Workspace, Chat: s.Message.Chat, User: "contract"}
	want := root
	c.Addresser.Address(&root)
	if root.Channel != want.Channel || root.Workspace != want.Workspace || root.Chat != want.Chat || root.Thread != "" {
		t.Fatalf("Address changed the destination to %q/%q/%q thread %q; want %q/%q/%q and no thread",
			root.Channel, root.Workspace, root.Chat, root.Thread, want.Channel, want.Workspace, want.Chat)
	}
	if c.Poster == nil {
		return
	}
	ctx := contextFor(t)
	id, err := c.Poster.Post(ctx, root, c.Poster.Parts(root, channels.Reply{Text: "contract: a root post"})[0])
	if err != nil {
		noSecret(t, s, "Post's error", err.Error())
		t.Fatalf("Post of an addressed message = %v", err)
	}
	if id == "" {
		return // no post is named: there is no thread to address
	}
	reply := channels.Message{ID: "work:contract:thread", Channel: want.Channel, Workspace: want.Workspace, Chat: want.Chat, Thread: id, User: "contract"}
	c.Addresser.Address(&reply)
	if reply.Chat != want.Chat || reply.Thread != id {
		t.Fatalf("Address of a message in thread %q changed it to chat %q thread %q", id, reply.Chat, reply.Thread)
	}
	if _, err := c.Poster.Post(ctx, reply, c.Poster.Parts(reply, channels.Reply{Text: "contract: in its thread"})[0]); err != nil {
		noSecret(t, s, "Post's error", err.Error())
		t.Fatalf("Post in the addressed thread = %v", err)
	}
}

// contractPNG is a 1×1 PNG: the smallest image every platform takes.
var contractPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// checkUploader: limits are never negative; where the chat of s.Message
// takes images, a small one is sent with no error, and sent again with
// its key and again set it is found: the same message's id comes back.
func checkUploader(t *testing.T, s Subject) {
	ch, _ := build(t, s)
	u := channels.CapabilitiesOf(ch).Uploader
	lim := u.FileLimits(s.Message)
	if lim.MaxImage < 0 || lim.MaxFile < 0 {
		t.Fatalf("FileLimits = %+v; want no negative limit", lim)
	}
	if lim.MaxImage == 0 {
		return
	}
	ctx := contextFor(t)
	f := channels.File{Name: "contract.png", Type: "image/png", Data: contractPNG, Caption: "contract: an image"}
	id, err := u.Upload(ctx, s.Message, f, "contract-upload-1", false)
	if err != nil {
		noSecret(t, s, "Upload's error", err.Error())
		t.Fatalf("Upload of a 1×1 PNG = %v", err)
	}
	again, err := u.Upload(ctx, s.Message, f, "contract-upload-1", true)
	if err != nil {
		t.Fatalf("Upload again with its key = %v", err)
	}
	if id != "" && again != id {
		t.Errorf("Upload again with its key = id %q; want the first upload's %q, found instead of sent twice", again, id)
	}
}
