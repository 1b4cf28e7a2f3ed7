package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// goldenIndex is the skill index the golden system prompts were made with.
const goldenIndex = "## Skills\n- runbook: What to do when an alert fires."

// A configuration without profiles sends the system prompt it sent before
// profiles existed, byte for byte: the provider's prompt cache of every
// running bot survives the upgrade.
func TestDefaultSystemPromptIsUnchanged(t *testing.T) {
	a := New(Config{Model: "m"}, nil, nil, nil, nil)
	for _, c := range []struct {
		golden string
		got    []byte
	}{
		{"testdata/system_prompt_default.golden", []byte(a.SystemPrompt(goldenIndex))},
		{"testdata/system_prompt_default.golden", []byte(a.SystemPromptFor(Persona{}, goldenIndex))},
		{"testdata/system_message_default.golden", a.systemMessage(Persona{}, goldenIndex)},
	} {
		want, err := os.ReadFile(c.golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.got, want) {
			t.Errorf("%s changed:\n got %q\nwant %q", c.golden, c.got, want)
		}
	}
}

func TestPersonaMakesOverTheSystemPrompt(t *testing.T) {
	a := New(Config{Model: "m", SystemPrompt: "Base prompt."}, nil, nil, nil, nil)
	for _, c := range []struct {
		name    string
		persona Persona
		want    []string // in order
		absent  string
	}{
		{"none", Persona{}, []string{"Base prompt.\n\n", boundaryParagraph, "\n\n" + goldenIndex}, ""},
		{"replace", Persona{Name: "ops", Prompt: "  You are the on-call assistant. Be terse.\n"}, []string{"You are the on-call assistant. Be terse.\n\n", boundaryParagraph, "\n\n" + goldenIndex}, "Base prompt."},
		{"append", Persona{Name: "hr", Append: "Be polite; never discuss salaries."}, []string{"Base prompt.\n\nBe polite; never discuss salaries.\n\n", boundaryParagraph, "\n\n" + goldenIndex}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := a.SystemPromptFor(c.persona, goldenIndex)
			if !strings.HasPrefix(got, c.want[0]) || !strings.HasSuffix(got, c.want[len(c.want)-1]) {
				t.Errorf("prompt = %q, want it to start %q and end %q", got, c.want[0], c.want[len(c.want)-1])
			}
			if c.want[0]+c.want[1]+c.want[2] != got {
				t.Errorf("prompt = %q, want %q", got, strings.Join(c.want, ""))
			}
			if c.absent != "" && strings.Contains(got, c.absent) {
				t.Errorf("prompt %q still holds %q", got, c.absent)
			}
			// Another agent (another replica) builds the same bytes.
			other := New(Config{Model: "m2", SystemPrompt: "Base prompt."}, nil, nil, nil, nil)
			if again := other.SystemPromptFor(c.persona, goldenIndex); again != got {
				t.Errorf("another agent built %q, want %q", again, got)
			}
		})
	}
}

// Turns of two personas, interleaved, each send their own persona's
// system message, and the same bytes every time: the cache is per
// persona, and a turn of one never evicts the other's into a rebuild
// that could differ.
func TestEachPersonaKeepsItsSystemMessage(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	ops := Persona{Name: "ops", Prompt: "You are the on-call assistant."}
	hr := Persona{Name: "hr", Append: "Be polite."}
	personas := []Persona{ops, hr, {}, ops, hr, ops, {}}
	for _, p := range personas {
		h.run(t, TurnRequest{UserText: "hi", Persona: p, SystemExtra: goldenIndex})
	}
	raw := h.srv.RawRequests()
	if len(raw) != len(personas) {
		t.Fatalf("%d requests, want %d", len(raw), len(personas))
	}
	first := map[string][]byte{}
	for i, body := range raw {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		p := personas[i]
		want := appendMessage(nil, "system", buildSystemPrompt(DefaultSystemPrompt, p, goldenIndex))
		if !bytes.Equal(req.Messages[0], want) {
			t.Errorf("request %d (persona %q): system message %s, want %s", i, p.Name, req.Messages[0], want)
		}
		if prev, ok := first[p.Name]; ok && !bytes.Equal(prev, req.Messages[0]) {
			t.Errorf("request %d: persona %q's system message changed", i, p.Name)
		}
		first[p.Name] = req.Messages[0]
	}
	if bytes.Equal(first["ops"], first["hr"]) || bytes.Equal(first["ops"], first[""]) {
		t.Error("two personas sent the same system message")
	}
}
