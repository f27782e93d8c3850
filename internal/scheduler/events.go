package scheduler

import (
	"context"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"

	"github.com/skiff-sh/skiff/internal/workerpool"
)

// boundedSink caps the event writes in flight: client-go's broadcaster
// starts a goroutine per event, and a burst of them would otherwise open
// more HTTP/2 streams than one connection carries, making the client dial
// (and handshake) extra connections. The writes run on workers: through
// the in-process API server a write goes as deep as any request, and a
// worker's stack has grown for it already (the broadcaster's goroutine of
// the event has not).
type boundedSink struct {
	sink    events.EventSink
	slots   chan struct{}
	workers *workerpool.Pool
}

// eventWriterIdle is how long an idle event writer lives.
const eventWriterIdle = 10 * time.Second

var _ events.EventSink = &boundedSink{}

func newBoundedSink(sink events.EventSink, n int) *boundedSink {
	return &boundedSink{sink: sink, slots: make(chan struct{}, n), workers: workerpool.New(n, eventWriterIdle)}
}

// write runs one write of the sink on a worker once a slot is free.
func (b *boundedSink) write(ctx context.Context, call func() (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.slots }()
	var out *eventsv1.Event
	var err error
	b.workers.Run(func() { out, err = call() })
	return out, err
}

func (b *boundedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return b.write(ctx, func() (*eventsv1.Event, error) { return b.sink.Create(ctx, e) })
}

func (b *boundedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return b.write(ctx, func() (*eventsv1.Event, error) { return b.sink.Update(ctx, e) })
}

func (b *boundedSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return b.write(ctx, func() (*eventsv1.Event, error) { return b.sink.Patch(ctx, e, data) })
}
