package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"math/rand"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wecomapp"
	"github.com/parleyhq/parley/internal/redistest"
)

// panelServer is an MCP server (the SDK's, over HTTP) with one tool,
// render_panel, that answers with a PNG as a Grafana server renders a
// panel.
func panelServer(t *testing.T) (url string, panel []byte) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 80, 40))
	rand.New(rand.NewSource(7)).Read(img.Pix)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	panel = b.Bytes()
	s := mcptest.New("grafana")
	sdk.AddTool(s, &sdk.Tool{Name: "render_panel", Description: "Renders a dashboard panel as a PNG.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the error-rate panel"}, &sdk.ImageContent{MIMEType: "image/png", Data: panel}}}, nil, nil
		})
	srv := httptest.NewServer(mcptest.Handler(s))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", panel
}

// panelAndChart scripts the model for one conversation: render the panel,
// send it and a chart of the same hour, then answer.
func panelAndChart(model *openaitest.Server) {
	model.Script(
		openaitest.Tools(openaitest.Call("grafana__render_panel", `{}`)),
		openaitest.Tools(
			openaitest.Call("send_file", `{"id":"att_1","caption":"error rate, last hour"}`),
			openaitest.Call("send_file", `{"caption":"5xx by minute","chart":{"type":"line","title":"5xx","series":[{"name":"api","points":[[1767225600,0.1],[1767225660,0.4],[1767225720,0.2]]}]}}`),
		),
		openaitest.Text("Here is the panel, and the 5xx rate charted."),
	)
}

// isPNG reports whether data is a PNG of at least one pixel.
func isPNG(data []byte) bool {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	return err == nil && format == "png" && cfg.Width > 0
}

// TestAnMCPImageAndAChartReachEachPlatformOnceAcrossTwoReplicas: one
// deployment of two replicas serving Slack, Feishu and a WeCom app, an
// MCP server whose tool renders a panel, and a model that sends the
// panel and a chart with its answer. Each platform's question is
// delivered to both replicas (a retry, a re-push, a callback through a
// load balancer), and each platform gets the two images natively, once
// each: in the Slack thread, in the Feishu thread, to the WeCom member.
func TestAnMCPImageAndAChartReachEachPlatformOnceAcrossTwoReplicas(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	const (
		corp, appSecret, appToken, appKey = "ww-files-corp", "files-wecom-app-secret", "filesAppToken", "filesAppAESKey0123456789abcdefghijklmnopqrs"
		agentID                           = 1000003
	)
	r, model := redistest.New(t), openaitest.New(t)
	slack, feishu := slacktest.New(t), feishutest.New(t)
	wecom := wechattest.NewWeComApp(t, corp, appSecret, agentID)
	mcpURL, panel := panelServer(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
gateway:
  shutdown_timeout: 10s
tools:
  mcp:
    servers:
      grafana:
        url: %q
        read: [render_panel]
wecom_app:
  apps:
    - {name: ops, corp_id: %s, agent_id: %d, secret: "${WECOM_APP_SECRET}",
       token: %q, encoding_aes_key: %q, base_url: %q}
`, r.Prefix, mcpURL, corp, agentID, appToken, appKey, wecom.URL()))
	env := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "WECOM_APP_SECRET": appSecret,
		"SLACK_BOT_TOKEN": slacktest.BotToken, "SLACK_SIGNING_SECRET": slacktest.Secret, "SLACK_API_URL": slack.APIURL(),
		"FEISHU_APP_ID": "cli_files_e2e", "FEISHU_APP_SECRET": "app-secret", "FEISHU_VERIFICATION_TOKEN": e2eFeishuToken,
		"FEISHU_ENCRYPT_KEY": e2eFeishuKey, "FEISHU_BASE_URL": feishu.URL, "FEISHU_MODE": "webhook",
	}
	replicas := []*wechatServe{startWeChatServe(t, env), startWeChatServe(t, env)}
	logs := []*syncBuffer{replicas[0].stderr, replicas[1].stderr}
	idleBoth := func() {
		t.Helper()
		wechatEventually(t, "both replicas idle", func() bool { return idle(replicas[0].base) && idle(replicas[1].base) }, logs...)
	}

	// Slack: a mention at replica A, Slack's retry of it at replica B.
	panelAndChart(model)
	const ts = "1700000100.000100"
	mention := slacktest.Event("EvFiles1", slacktest.Mention("C7", "U1", ts, "", "show me the error rate"))
	(&slackServe{base: replicas[0].base, stderr: replicas[0].stderr}).event(t, mention, 0)
	(&slackServe{base: replicas[1].base, stderr: replicas[1].stderr}).event(t, mention, 1)
	wechatEventually(t, "two files in the Slack thread", func() bool { return len(slack.Uploads()) >= 2 }, logs...)
	idleBoth()

	// Feishu: a mention at replica B, pushed again to replica A.
	panelAndChart(model)
	question := groupEvent("om_files", "ou_alice", "show me the error rate", true)
	(&feishuServe{base: replicas[1].base}).post(t, question)
	(&feishuServe{base: replicas[0].base}).post(t, question)
	wechatEventually(t, "two images in the Feishu thread", func() bool { return len(feishu.Files()) >= 2 }, logs...)
	idleBoth()

	// The WeCom app: one callback delivered to both replicas at once.
	panelAndChart(model)
	app := wechattest.NewPlatform(t, appToken, appKey, corp)
	req := app.Encrypted(t, wechattest.Inbound{To: corp, From: "zhangsan", Content: "show me the error rate", MsgID: "880101", AgentID: strconv.Itoa(agentID)}, false)
	var wg sync.WaitGroup
	for _, rp := range replicas {
		wg.Go(func() { wechattest.Post(t, rp.base+wecomapp.PathPrefix+"ops", req) })
	}
	wg.Wait()
	wechatEventually(t, "two images to the WeCom member", func() bool { return len(wecom.MediaMessages()) >= 2 }, logs...)
	idleBoth()

	ups := slack.Uploads()
	if len(ups) != 2 {
		t.Fatalf("%d files in Slack; want the panel and the chart, once each: %+v", len(ups), ups)
	}
	if !bytes.Equal(ups[0].Data, panel) || ups[0].Comment != "error rate, last hour" || !isPNG(ups[1].Data) || ups[1].Comment != "5xx by minute" {
		t.Errorf("Slack files: %q (%d bytes, panel %v), %q (PNG %v); want the panel then the chart", ups[0].Comment, len(ups[0].Data), bytes.Equal(ups[0].Data, panel), ups[1].Comment, isPNG(ups[1].Data))
	}
	for _, u := range ups {
		if u.Channel != "C7" || u.ThreadTS != ts || u.Type != "image/png" {
			t.Errorf("Slack file %s in %s/%s as %s; want a PNG in the question's thread", u.Name, u.Channel, u.ThreadTS, u.Type)
		}
	}

	files := feishu.Files()
	if len(files) != 2 {
		t.Fatalf("%d files in Feishu; want the panel and the chart, once each: %+v", len(files), files)
	}
	if !bytes.Equal(files[0].Data, panel) || !isPNG(files[1].Data) {
		t.Errorf("Feishu files are not the panel then the chart")
	}
	for _, f := range files {
		if f.ReplyTo != "om_files" || !f.ReplyInThread || f.Type != "image/png" {
			t.Errorf("Feishu file %+v; want an image replied in the question's thread", f.Sent)
		}
	}

	media := wecom.MediaMessages()
	if len(media) != 2 {
		t.Fatalf("%d media messages in WeCom; want the panel and the chart, once each: %+v", len(media), media)
	}
	if !bytes.Equal(media[0].Data, panel) || !isPNG(media[1].Data) {
		t.Errorf("WeCom media are not the panel then the chart")
	}
	for _, m := range media {
		if m.ToUser != "zhangsan" || m.MsgType != "image" {
			t.Errorf("WeCom media %s to %q; want images to the member who asked", m.MsgType, m.ToUser)
		}
	}
}
