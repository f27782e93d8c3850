package scheduler

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// boundedSink caps the event writes in flight: client-go's broadcaster
// starts a goroutine per event, and a burst of them would otherwise open
// more HTTP/2 streams than one connection carries, making the client dial
// (and handshake) extra connections.
type boundedSink struct {
	sink  events.EventSink
	slots chan struct{}
}

var _ events.EventSink = &boundedSink{}

func newBoundedSink(sink events.EventSink, n int) *boundedSink {
	return &boundedSink{sink: sink, slots: make(chan struct{}, n)}
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
	return b.sink.Create(ctx, e)
}

func (b *boundedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-b.slots }()
	return b.sink.Update(ctx, e)
}

func (b *boundedSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-b.slots }()
	return b.sink.Patch(ctx, e, data)
}
