package skills

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSkillFile(t *testing.T) {
	type want struct {
		name, desc string
		err        error
		check      func(t *testing.T, s *Skill, ws []Warning)
	}
	cases := []struct {
		name   string
		folder string
		data   string
		want   want
	}{
		{"plain", "demo", "---\nname: demo\ndescription: Does things.\n---\n# Body\n",
			want{name: "demo", desc: "Does things.", check: func(t *testing.T, s *Skill, ws []Warning) {
				if s.Body != "# Body\n" || s.BodyLine != 5 {
					t.Errorf("body %q line %d", s.Body, s.BodyLine)
				}
				if len(ws) != 0 {
					t.Errorf("warnings: %v", ws)
				}
			}}},
		{"literal block", "demo", "---\nname: demo\ndescription: |\n  line one\n  line two\n---\n",
			want{name: "demo", desc: "line one\nline two"}},
		{"strip block", "demo", "---\nname: demo\ndescription: |-\n  kept\n    indented\n---\n",
			want{name: "demo", desc: "kept\n  indented"}},
		{"folded block", "demo", "---\nname: demo\ndescription: >\n  folded\n  text\n\n  para\n---\n",
			want{name: "demo", desc: "folded text\npara"}},
		{"plain multi-line", "demo", "---\nname: demo\ndescription:\n  React patterns. Use\n  when refactoring.\nlicense: MIT\n---\n",
			want{name: "demo", desc: "React patterns. Use when refactoring.", check: func(t *testing.T, s *Skill, _ []Warning) {
				if s.License != "MIT" {
					t.Errorf("license %q", s.License)
				}
			}}},
		{"unquoted colon retried", "demo", "---\nname: demo\ndescription: Use when: the user asks\nversion: 1.0\n---\nbody\n",
			want{name: "demo", desc: "Use when: the user asks", check: func(t *testing.T, s *Skill, ws []Warning) {
				if s.Version != "1.0" {
					t.Errorf("version %q", s.Version)
				}
				if len(ws) != 1 || ws[0].Line != 3 || !strings.Contains(ws[0].Msg, "only parsed after") {
					t.Errorf("want one retry warning at line 3, got %v", ws)
				}
			}}},
		{"unquoted colon in multi-line plain", "demo", "---\nname: demo\ndescription: Start here\n  then: continue\nauthor: me\n---\n",
			want{name: "demo", desc: "Start here then: continue", check: func(t *testing.T, s *Skill, _ []Warning) {
				if s.Author != "me" {
					t.Errorf("author %q", s.Author)
				}
			}}},
		{"hash inside value", "demo", "---\nname: demo\ndescription: Write C# and F# code #comment\n---\n",
			want{name: "demo", desc: "Write C# and F# code"}},
		{"quoted escapes", "demo", "---\nname: \"demo\"\ndescription: \"Tab\\there, quote \\\" and \\u00e9 # not a comment\"\n---\n",
			want{name: "demo", desc: "Tab\there, quote \" and é # not a comment"}},
		{"single quoted", "demo", "---\nname: 'demo'\ndescription: 'It''s: fine'\n---\n",
			want{name: "demo", desc: "It's: fine"}},
		{"flow and block lists", "demo", "---\nname: demo\ndescription: d\ntags: [web, \"browser\", search]\nallowed-tools:\n  - Read\n  - Bash(git:*)\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, _ []Warning) {
				if !reflect.DeepEqual(s.Tags, []string{"web", "browser", "search"}) {
					t.Errorf("tags %q", s.Tags)
				}
				if !reflect.DeepEqual(s.AllowedTools, []string{"Read", "Bash(git:*)"}) {
					t.Errorf("tools %q", s.AllowedTools)
				}
			}}},
		{"allowed-tools string", "demo", "---\nname: demo\ndescription: d\nallowed-tools: Read Write  Bash\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, _ []Warning) {
				if !reflect.DeepEqual(s.AllowedTools, []string{"Read", "Write", "Bash"}) {
					t.Errorf("tools %q", s.AllowedTools)
				}
			}}},
		{"metadata text kept", "demo", "---\nname: demo\ndescription: d\nmetadata:\n  version: 1.0\n  released: 2024-01-05\n  count: 010\n  ok: yes\n  list: [a, b]\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, ws []Warning) {
				want := map[string]string{"version": "1.0", "released": "2024-01-05", "count": "010", "ok": "yes"}
				if !reflect.DeepEqual(s.Metadata, want) {
					t.Errorf("metadata %v", s.Metadata)
				}
				if len(ws) != 1 || ws[0].Line != 9 || !strings.Contains(ws[0].Msg, "metadata.list") {
					t.Errorf("want list warning at line 9, got %v", ws)
				}
			}}},
		{"cjk", "web-access", "---\nname: web-access\ndescription: 所有联网操作必须通过此 skill 处理\ntags: [联网, 浏览器]\n---\n正文\n",
			want{name: "web-access", desc: "所有联网操作必须通过此 skill 处理", check: func(t *testing.T, s *Skill, _ []Warning) {
				if s.Body != "正文\n" {
					t.Errorf("body %q", s.Body)
				}
			}}},
		{"bom and crlf", "demo", "\ufeff---\r\nname: demo\r\ndescription: |\r\n  a\r\n  b\r\n---\r\nbody\r\nline\r\n",
			want{name: "demo", desc: "a\nb", check: func(t *testing.T, s *Skill, _ []Warning) {
				if s.Body != "body\nline\n" || s.BodyLine != 7 {
					t.Errorf("body %q line %d", s.Body, s.BodyLine)
				}
			}}},
		{"tab after colon", "demo", "---\nname:\tdemo\ndescription:\tTabbed\n---\n",
			want{name: "demo", desc: "Tabbed"}},
		{"tab indentation retried", "demo", "---\nname: demo\ndescription: d\nmetadata:\n\tauthor: me\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, ws []Warning) {
				if s.Metadata["author"] != "me" || !hasWarning(ws, "only parsed after") {
					t.Errorf("metadata %v warnings %v", s.Metadata, ws)
				}
			}}},
		{"wrong shapes dropped", "demo", "---\nname: demo\ndescription: d\nauthor: {name: x}\ntags: {a: b}\ndisable-model-invocation: maybe\nversion: [1]\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, ws []Warning) {
				if s.Author != "" || s.Tags != nil || s.Version != "" || s.DisableModelInvocation {
					t.Errorf("fields not dropped: %+v", s)
				}
				lines := []int{4, 5, 6, 7}
				if len(ws) != len(lines) {
					t.Fatalf("warnings %v", ws)
				}
				for i, w := range ws {
					if w.Line != lines[i] || w.File != "/x/demo/SKILL.md" {
						t.Errorf("warning %d at %s:%d", i, w.File, w.Line)
					}
				}
			}}},
		{"disable model invocation", "demo", "---\nname: demo\ndescription: d\ndisable-model-invocation: true\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, _ []Warning) {
				if !s.DisableModelInvocation {
					t.Error("not disabled")
				}
			}}},
		{"unknown keys ignored", "demo", "---\nname: demo\ndescription: d\nargument-hint: <file>\nfoo: {bar: 1}\n---\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, _ *Skill, ws []Warning) {
				if len(ws) != 0 {
					t.Errorf("warnings %v", ws)
				}
			}}},
		{"name differs from folder", "folder-name", "---\nname: real-name\ndescription: d\n---\n",
			want{name: "real-name", desc: "d"}},
		{"capitals fall back to folder", "my-skill", "---\nname: My Skill\ndescription: d\n---\n",
			want{name: "my-skill", desc: "d", check: func(t *testing.T, _ *Skill, ws []Warning) {
				if !hasWarning(ws, "not valid") || ws[0].Line != 2 {
					t.Errorf("warnings %v", ws)
				}
			}}},
		{"missing name uses folder", "my-skill", "---\ndescription: d\n---\n",
			want{name: "my-skill", desc: "d"}},
		{"underscores normalised", "my_skill", "---\nname: my_skill\ndescription: d\n---\n",
			want{name: "my-skill", desc: "d", check: func(t *testing.T, _ *Skill, ws []Warning) {
				if len(ws) != 1 || ws[0].Line != 2 || !strings.Contains(ws[0].Msg, `loaded as "my-skill"`) {
					t.Errorf("warnings %v", ws)
				}
			}}},
		{"leading hyphen normalised", "x", "---\nname: -draft-notes\ndescription: d\n---\n",
			want{name: "draft-notes", desc: "d", check: func(t *testing.T, _ *Skill, ws []Warning) {
				if !hasWarning(ws, `loaded as "draft-notes"`) {
					t.Errorf("warnings %v", ws)
				}
			}}},
		{"folder with underscores normalised", "_my_tool_", "---\ndescription: d\n---\n",
			want{name: "my-tool", desc: "d", check: func(t *testing.T, _ *Skill, ws []Warning) {
				if !hasWarning(ws, `loaded as "my-tool"`) {
					t.Errorf("warnings %v", ws)
				}
			}}},
		{"blank lines before the frontmatter are reported", "demo", "\n  \n---\nname: demo\ndescription: d\nversion: [1]\n---\n# Title\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, ws []Warning) {
				if len(ws) != 2 || ws[0].Line != 1 || !strings.Contains(ws[0].Msg, "2 blank line(s) before the opening ---") {
					t.Fatalf("warnings %v", ws)
				}
				if ws[1].Line != 6 { // line numbers still count the blank lines
					t.Errorf("version warning at line %d, want 6", ws[1].Line)
				}
				if s.Body != "# Title\n" || s.BodyLine != 8 {
					t.Errorf("body %q line %d", s.Body, s.BodyLine)
				}
			}}},
		{"no valid identity", "Bad Folder", "---\nname: ../etc\ndescription: d\n---\n",
			want{err: ErrInvalidName}},
		{"double hyphen invalid", "x--y", "---\nname: a--b\ndescription: d\n---\n",
			want{err: ErrInvalidName}},
		{"missing description", "demo", "---\nname: demo\n---\n", want{err: ErrNoDescription}},
		{"empty description", "demo", "---\nname: demo\ndescription: \"  \"\n---\n", want{err: ErrNoDescription}},
		{"description wrong shape", "demo", "---\nname: demo\ndescription: [a]\n---\n", want{err: ErrNoDescription}},
		{"no frontmatter", "demo", "# just markdown\n", want{err: ErrNoFrontmatter}},
		{"unclosed frontmatter", "demo", "---\nname: demo\ndescription: d\n", want{err: ErrNoFrontmatter}},
		{"broken yaml", "demo", "---\nname: demo\ndescription: [unclosed\n---\n", want{err: ErrBadYAML}},
		{"yaml error names the file line", "demo", "---\nname: demo\ndescription: d\nmetadata:\n  a: b\n c: d\n---\n", want{err: ErrBadYAML, check: func(t *testing.T, _ *Skill, ws []Warning) {
			if w := ws[len(ws)-1]; w.Line != 5 || !strings.Contains(w.Msg, "line 5") {
				t.Errorf("warning %v", w)
			}
		}}},
		{"not a mapping", "demo", "---\n- a\n- b\n---\n", want{err: ErrBadYAML}},
		{"not utf8", "demo", "---\nname: demo\ndescription: \xff\xfe\n---\n", want{err: ErrNotUTF8}},
		{"oversize", "demo", "---\nname: demo\ndescription: d\n---\n" + strings.Repeat("x", MaxSkillFileBytes), want{err: ErrTooLarge}},
		{"oversized description still loads", "demo", "---\nname: demo\ndescription: " + strings.Repeat("long ", 400) + "\n---\n",
			want{name: "demo", desc: strings.TrimSpace(strings.Repeat("long ", 400))}},
		{"leading blank lines skipped", "demo", "---\nname: demo\ndescription: d\n---\n\n  \n# Title\n\ntext\n",
			want{name: "demo", desc: "d", check: func(t *testing.T, s *Skill, _ []Warning) {
				if s.Body != "# Title\n\ntext\n" || s.BodyLine != 7 {
					t.Errorf("body %q line %d", s.Body, s.BodyLine)
				}
			}}},
		{"empty body", "demo", "---\nname: demo\ndescription: d\n---", want{name: "demo", desc: "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "/x/" + tc.folder + "/SKILL.md"
			s, ws, err := ParseSkillFile(path, []byte(tc.data))
			if tc.want.err != nil {
				if !errors.Is(err, tc.want.err) {
					t.Fatalf("err = %v, want %v", err, tc.want.err)
				}
				if len(ws) == 0 || !strings.Contains(ws[len(ws)-1].Msg, "skipped") {
					t.Errorf("skip not explained in warnings: %v", ws)
				}
				if tc.want.check != nil {
					tc.want.check(t, s, ws)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v (warnings %v)", err, ws)
			}
			if s.Name != tc.want.name || s.Description != tc.want.desc {
				t.Errorf("got name %q desc %q, want %q %q", s.Name, s.Description, tc.want.name, tc.want.desc)
			}
			if s.Path != path || s.Dir != "/x/"+tc.folder || len(s.SHA256) != 64 {
				t.Errorf("path %q dir %q sha %q", s.Path, s.Dir, s.SHA256)
			}
			if tc.want.check != nil {
				tc.want.check(t, s, ws)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	cases := map[string]bool{
		"a": true, "pdf": true, "web-access": true, "a1-b2": true, strings.Repeat("a", 64): true,
		"": false, "-a": false, "a-": false, "a--b": false, "A": false, "a b": false, "a/b": false,
		"..": false, "a_b": false, "é": false, strings.Repeat("a", 65): false,
	}
	for name, want := range cases {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestWarningString(t *testing.T) {
	cases := []struct {
		w    Warning
		want string
	}{
		{Warning{"a/SKILL.md", 3, "bad"}, "a/SKILL.md:3: bad"},
		{Warning{"a/SKILL.md", 0, "bad"}, "a/SKILL.md: bad"},
	}
	for _, tc := range cases {
		if got := tc.w.String(); got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
	}
}
