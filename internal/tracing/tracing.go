// Package tracing sets up OpenTelemetry tracing through the Temporal SDK's
// interceptor, with one trace per turn across the turn workflow and its
// activities.
package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

type spanKey struct{}

// SpanContextKey is where the interceptor keeps the current span in a
// workflow context. The session workflow clears it when it starts a turn,
// so each turn is the root of its own trace.
var SpanContextKey any = spanKey{}

// Interceptor returns the SDK's tracing interceptor for a client or worker.
func Interceptor(tracer trace.Tracer) (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tracer, SpanContextKey: SpanContextKey})
}

// FromEnv builds a tracer provider from EVE_OTEL_EXPORTER: "" or "none"
// (off: returns nil), "stdout", or "otlp" (OTLP over HTTP; the standard
// OTEL_EXPORTER_OTLP_* variables configure it).
func FromEnv(ctx context.Context) (*sdktrace.TracerProvider, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch v := os.Getenv("EVE_OTEL_EXPORTER"); v {
	case "", "none":
		return nil, nil
	case "stdout":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	case "otlp":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("EVE_OTEL_EXPORTER=%q: want none, stdout or otlp", v)
	}
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp)), nil
}
