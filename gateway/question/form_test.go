package question_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/gateway/question"
)

const deploySchema = `{"type":"object","properties":{
  "env":{"type":"string","title":"Environment","enum":["prod","staging"],"enumNames":["Production","Staging"]},
  "replicas":{"type":"integer","minimum":1,"maximum":10},
  "notify":{"type":"boolean","default":false},
  "email":{"type":"string","format":"email"}
},"required":["env","replicas"]}`

func TestAnswersAreReadAgainstTheSchema(t *testing.T) {
	deploy, err := question.Parse([]byte(deploySchema))
	if err != nil {
		t.Fatal(err)
	}
	confirm, _ := question.Parse([]byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`))
	name, _ := question.Parse([]byte(`{"type":"object","properties":{"name":{"type":"string","minLength":2,"maxLength":5}}}`))
	multi, _ := question.Parse([]byte(`{"type":"object","properties":{"tags":{"type":"array","items":{"anyOf":[{"const":"a","title":"Alpha"},{"const":"b","title":"Beta"}]}}}}`))
	cases := []struct {
		name string
		form question.Form
		text string
		want map[string]any
		bad  string // part of the refusal, "" for none
	}{
		{"lines", deploy, "env: Production\nreplicas: 3", map[string]any{"env": "prod", "replicas": int64(3), "notify": false}, ""},
		{"json", deploy, `{"env":"staging","replicas":2,"notify":true,"email":"a@example.com"}`,
			map[string]any{"env": "staging", "replicas": int64(2), "notify": true, "email": "a@example.com"}, ""},
		{"choice by number", deploy, "env = 2\nreplicas = 1", map[string]any{"env": "staging", "replicas": int64(1), "notify": false}, ""},
		{"required missing", deploy, "env: prod", nil, "replicas is required"},
		{"out of range", deploy, "env: prod\nreplicas: 11", nil, "between 1 and 10"},
		{"not whole", deploy, "env: prod\nreplicas: 1.5", nil, "whole number"},
		{"not a choice", deploy, "env: dev\nreplicas: 1", nil, "one of the choices"},
		{"bad email", deploy, "env: prod\nreplicas: 1\nemail: not-an-address", nil, "valid email"},
		{"unknown field", deploy, "env: prod\nreplicas: 1\nroot: yes", nil, `no field "root"`},
		{"one field takes the whole text", confirm, "Yes", map[string]any{"ok": true}, ""},
		{"a button's value", confirm, "false", map[string]any{"ok": false}, ""},
		{"not yes or no", confirm, "perhaps", nil, "yes or no"},
		{"too short", name, "a", nil, "at least 2"},
		{"too long", name, "abcdef", nil, "at most 5"},
		{"optional left out", name, "", map[string]any{}, ""},
		{"several choices", multi, "Alpha, b", map[string]any{"tags": []string{"a", "b"}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.form.Read(c.text)
			if c.bad != "" {
				if !errors.Is(err, question.ErrAnswer) || !strings.Contains(err.Error(), c.bad) {
					t.Fatalf("Read = %v, %v; want a refusal with %q", got, err, c.bad)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Read = %#v, %v; want %#v", got, err, c.want)
			}
		})
	}
}

func TestSchemasParleyCannotAskAreRefused(t *testing.T) {
	for _, raw := range []string{
		`{"type":"array"}`,
		`{"type":"object","properties":{"x":{"type":"object"}}}`,
		`{"type":"object","properties":{"a b":{"type":"string"}}}`,
		`{"type":"object","properties":{"x":{"type":"array","items":{"type":"string"}}}}`,
		`not json`,
	} {
		if _, err := question.Parse([]byte(raw)); !errors.Is(err, question.ErrSchema) {
			t.Errorf("Parse(%s) = %v, want ErrSchema", raw, err)
		}
	}
	var many strings.Builder
	many.WriteString(`{"type":"object","properties":{`)
	for i := range question.MaxFields + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"f` + string(rune('a'+i)) + `":{"type":"string"}`)
	}
	many.WriteString("}}")
	if _, err := question.Parse([]byte(many.String())); !errors.Is(err, question.ErrSchema) {
		t.Errorf("a form of %d fields: %v", question.MaxFields+1, err)
	}
}

func TestChoicesAreButtonsOnlyForOneField(t *testing.T) {
	confirm, _ := question.Parse([]byte(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`))
	if got := confirm.Choices(); len(got) != 2 || got[0].Value != "true" {
		t.Fatalf("a yes/no: %v", got)
	}
	deploy, _ := question.Parse([]byte(deploySchema))
	if got := deploy.Choices(); got != nil {
		t.Fatalf("a form of several fields has buttons: %v", got)
	}
	evil, _ := question.Parse([]byte(`{"type":"object","properties":{"x":{"type":"string","title":"<!channel> @here"}, "y":{"type":"string"}}}`))
	if how := evil.How(); strings.Contains(how, "<!channel>") || strings.Contains(how, "@here") {
		t.Fatalf("the server's words are not inert: %s", how)
	}
}
