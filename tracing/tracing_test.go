package tracing_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestWithoutAnEndpointTracingIsOffAndFree(t *testing.T) {
	provider, stop, err := tracing.Setup(context.Background(), env(nil), "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(context.Background())
	tr := tracing.New(provider)
	if tr.On() {
		t.Fatal("tracing is on without an endpoint")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := tr.Start(ctx, "turn")
		if c != ctx || span.IsRecording() {
			t.Fatal("an off tracer started a span")
		}
		span.End()
		tr.Between(ctx, "queue", time.Now(), time.Now())
	})
	if allocs != 0 {
		t.Fatalf("an off tracer allocates %v times per span; want 0", allocs)
	}
}

func TestAGRPCProtocolIsRefused(t *testing.T) {
	_, _, err := tracing.Setup(context.Background(), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	}), "v1")
	if err == nil || !strings.Contains(err.Error(), "http/protobuf") {
		t.Fatalf("Setup = %v; want a refusal naming http/protobuf", err)
	}
}

// receiver is a fake OTLP/HTTP collector.
type receiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string
	headers http.Header
	path    string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers, r.path = req.Header.Clone(), req.URL.Path
	// ExportTraceServiceRequest: field 1, repeated ResourceSpans.
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body = body[n:]
		b, n := protowire.ConsumeBytes(body)
		if n < 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body = body[n:]
		var rs tracepb.ResourceSpans
		if err := proto.Unmarshal(b, &rs); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				r.service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	w.WriteHeader(http.StatusOK)
}

func TestSpansReachAnOTLPReceiver(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	provider, stop, err := tracing.Setup(context.Background(), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":  "authorization=Bearer%20s3cret,x-tenant=parley",
	}), "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	tr := tracing.New(provider)
	ctx, parent := tr.Start(context.Background(), "receive")
	_, child := tr.Start(ctx, "model")
	child.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", 42))
	child.End()
	parent.End()
	if err := stop(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.path != "/v1/traces" || rcv.headers.Get("Authorization") != "Bearer s3cret" || rcv.headers.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("request: path %q, headers %v", rcv.path, rcv.headers)
	}
	if rcv.service != "parley" {
		t.Fatalf("service.name = %q", rcv.service)
	}
	if len(rcv.spans) != 2 {
		t.Fatalf("received %d spans; want 2", len(rcv.spans))
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range rcv.spans {
		byName[s.Name] = s
	}
	m, r := byName["model"], byName["receive"]
	if m == nil || r == nil || !bytes.Equal(m.ParentSpanId, r.SpanId) || !bytes.Equal(m.TraceId, r.TraceId) {
		t.Fatalf("spans %v: want model a child of receive in one trace", rcv.spans)
	}
	if a := m.Attributes; len(a) != 1 || a[0].Key != "gen_ai.usage.input_tokens" || a[0].Value.GetIntValue() != 42 {
		t.Fatalf("model attributes = %v", a)
	}
}

func TestTraceIDsOnLogLinesAndExemplars(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	ctx, span := tr.Start(context.Background(), "turn")
	defer span.End()
	id := span.SpanContext().TraceID().String()

	var out bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewTextHandler(&out, nil))).With("component", "gateway")
	log.InfoContext(ctx, "in the turn")
	log.Info("outside any turn")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.Contains(lines[0], "trace_id="+id) || strings.Contains(lines[1], "trace_id") {
		t.Fatalf("log lines:\n%s", out.String())
	}

	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_seconds", Help: "x"})
	tracing.Observe(ctx, h, 0.2)
	tracing.Observe(context.Background(), h, 0.3)
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	families, _ := reg.Gather()
	var exemplars []string
	for _, b := range families[0].Metric[0].Histogram.Bucket {
		if e := b.Exemplar; e != nil {
			for _, l := range e.Label {
				exemplars = append(exemplars, l.GetName()+"="+l.GetValue())
			}
		}
	}
	if len(exemplars) != 1 || exemplars[0] != "trace_id="+id {
		t.Fatalf("exemplars = %v; want the turn's trace id once", exemplars)
	}
}
