package skills

import (
	"reflect"
	"testing"
)

func TestFind(t *testing.T) {
	c := newCatalog(
		&Skill{Name: "code-review", Description: "Review code for security and style.", Tags: []string{"quality"}},
		&Skill{Name: "review", Description: "Generic review helper."},
		&Skill{Name: "security-audit", Description: "Audit dependencies.", Tags: []string{"review", "security"}},
		&Skill{Name: "deploy", Description: "Ship the application to production."},
		&Skill{Name: "web-access", Description: "所有联网操作必须通过此技能处理，包括搜索和网页抓取", Tags: []string{"浏览器"}},
		&Skill{Name: "zh-review", Description: "代码审查决策手册，按安全、性能、风格检查"},
		&Skill{Name: "hidden-review", Description: "review", DisableModelInvocation: true},
		&Skill{Name: "secret-review", Description: "review"},
	)
	notSecret := func(s *Skill) bool { return s.Name != "secret-review" }
	tests := []struct {
		query string
		limit int
		want  []string
	}{
		// exact name ≫ name term + description (14) > name term (12) > tag (6)
		{"review", 0, []string{"review", "code-review", "zh-review", "security-audit"}},
		{"code review", 0, []string{"code-review", "review", "zh-review", "security-audit"}},
		{"code-review", 0, []string{"code-review", "review", "zh-review", "security-audit"}},
		{"security", 0, []string{"security-audit", "code-review"}},
		{"quality", 0, []string{"code-review"}},
		{"production", 0, []string{"deploy"}},
		{"deployment", 0, []string{"deploy"}},
		{"the and of", 0, nil},
		{"", 0, nil},
		{"review", 1, []string{"review"}},
		{"网页抓取", 0, []string{"web-access"}},
		{"帮我做代码审查", 0, []string{"zh-review"}},
		{"浏览器", 0, []string{"web-access"}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			got := names(c.Find(tc.query, notSecret, tc.limit))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Find(%q) = %v, want %v", tc.query, got, tc.want)
			}
		})
	}
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Use the Web-Access skill, please!", []string{"web", "access", "skill"}},
		{"代码审查", []string{"代", "码", "审", "查", "代码", "码审", "审查", "代码审", "码审查"}},
		{"React组件", []string{"react", "组", "件", "组件"}},
		{"v2 API", []string{"v2", "api"}},
	}
	for _, tc := range tests {
		if got := tokenize(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// find_skills matches CJK queries: Chinese (部署 finds a skill described in
// Chinese), Japanese kana, Korean, and full-width Latin letters.
func TestFindCJK(t *testing.T) {
	c := newCatalog(
		&Skill{Name: "runbook-zh", Description: "把应用部署到服务器，失败时回滚"},
		&Skill{Name: "runbook-ja", Description: "アプリをサーバーにデプロイする"},
		&Skill{Name: "runbook-ko", Description: "서버에 앱을 배포합니다"},
		&Skill{Name: "deploy-en", Description: "Deploy the app to production."},
		&Skill{Name: "review-zh", Description: "代码审查"},
	)
	tests := []struct {
		query string
		want  []string
	}{
		{"部署", []string{"runbook-zh"}},
		{"帮我部署一下服务", []string{"runbook-zh"}},
		{"デプロイ", []string{"runbook-ja"}},
		{"デプロイして", []string{"runbook-ja"}},
		{"배포", []string{"runbook-ko"}},
		{"ｄｅｐｌｏｙ", []string{"deploy-en"}},
		{"Ｄｅｐｌｏｙ　ｐｒｏｄｕｃｔｉｏｎ", []string{"deploy-en"}},
	}
	for _, tc := range tests {
		if got := names(c.Find(tc.query, nil, 0)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Find(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}
