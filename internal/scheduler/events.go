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

func (b *boundedSink) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *boundedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-b.slots }()
	var out *eventsv1.Event
	var err error
	b.workers.Run(func() { out, err = b.sink.Create(ctx, e) })
	return out, err
}

func (b *boundedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-b.slots }()
	var out *eventsv1.Event
	var err error
	b.workers.Run(func() { out, err = b.sink.Update(ctx, e) })
	return out, err
}

func (b *boundedSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-b.slots }()
	var out *eventsv1.Event
	var err error
	b.workers.Run(func() { out, err = b.sink.Patch(ctx, e, data) })
	return out, err
}
