// Package tracing is Parley's OpenTelemetry tracing: the tracer provider
// of the process, exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set and off otherwise; the
// trace id on log lines; and the trace id as the exemplar of latency
// histograms.
//
// A turn is traced as receive (the webhook hand-over) with two children:
// queue (from acceptance until a worker claimed the conversation) and turn
// (the worker's part), whose children are lock, history, model (one per
// request, with the token counts), tool (one per call), commit and send.
//
// Off, a Tracer starts nothing and returns the context it was given: no
// allocation, no clock read.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName names Parley's tracer.
const ScopeName = "github.com/parleyhq/parley"

// Tracer starts Parley's spans. The zero value is off.
type Tracer struct {
	t trace.Tracer
}

// New returns a Tracer on provider; nil is off.
func New(provider trace.TracerProvider) Tracer {
	if provider == nil {
		return Tracer{}
	}
	if _, off := provider.(noop.TracerProvider); off {
		return Tracer{}
	}
	return Tracer{t: provider.Tracer(ScopeName)}
}

// On reports whether spans are recorded.
func (t Tracer) On() bool { return t.t != nil }

// noopSpan is what an off Tracer returns.
var noopSpan = trace.SpanFromContext(context.Background())

// Start starts a span named name as a child of ctx's span. Off, it returns
// ctx itself and a span that records nothing. (The variants below take
// what would otherwise be options, which cost an allocation even off.)
func (t Tracer) Start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, noopSpan
	}
	return t.t.Start(ctx, name)
}

// StartKind is Start for a span of kind.
func (t Tracer) StartKind(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, noopSpan
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// StartAt is Start for a span that began at start.
func (t Tracer) StartAt(ctx context.Context, name string, start time.Time) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, noopSpan
	}
	return t.t.Start(ctx, name, trace.WithTimestamp(start))
}

// Between records a span that already happened, from start to end.
func (t Tracer) Between(ctx context.Context, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if t.t == nil {
		return
	}
	_, span := t.t.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}

// Fail marks span failed with err.
func Fail(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// propagator carries a span context through the conversation inbox.
var propagator = propagation.TraceContext{}

// Inject returns ctx's span context as a W3C traceparent, "" when there is
// none to carry.
func Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c.Get("traceparent")
}

// Extract returns ctx with the remote span context of a traceparent made by
// Inject as its parent; ctx itself when there is none.
func Extract(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Environment variables that turn the export on.
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Setup returns the process's tracer provider and the function that
// flushes and stops it. With neither endpoint variable set, the provider
// is off and costs nothing. The exporter also reads
// OTEL_EXPORTER_OTLP_[TRACES_]HEADERS and …_TIMEOUT; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the service (default "parley"). Only OTLP
// over HTTP with protobuf is spoken: a grpc protocol is refused rather than
// sent to the wrong port. ctx is not kept.
func Setup(ctx context.Context, getenv func(string) string, version string) (trace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	if getenv(envEndpoint) == "" && getenv(envTracesEndpoint) == "" {
		return noop.NewTracerProvider(), off, nil
	}
	for _, k := range []string{envTracesProtocol, envProtocol} {
		if p := strings.TrimSpace(getenv(k)); p != "" {
			if p != "http/protobuf" {
				return nil, nil, fmt.Errorf("tracing: %s=%s is not supported; Parley exports OTLP over HTTP (http/protobuf, port 4318)", k, p)
			}
			break
		}
	}
	exp, err := newExporter(getenv)
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceVersion(version),
	))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	if getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, _ = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName("parley")))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// LogHandler adds the trace_id and span_id of the context's span to every
// record logged with one (slog's …Context methods), so that a turn's log
// lines lead to its trace.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }

// Observe records v in o, with ctx's trace id as the exemplar when the
// span is sampled, so that a latency bucket links to a trace.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	sc := trace.SpanContextFromContext(ctx)
	if e, ok := o.(prometheus.ExemplarObserver); ok && sc.IsSampled() {
		e.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
		return
	}
	o.Observe(v)
}
