package queue

import "container/heap"

// podHeap is a binary heap of queued pods with an index for removal.
type podHeap struct {
	items []*QueuedPodInfo
	less  func(a, b *QueuedPodInfo) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIndex = i
	h.items[j].heapIndex = j
}
func (h *podHeap) Push(x any) {
	p := x.(*QueuedPodInfo)
	p.heapIndex = len(h.items)
	h.items = append(h.items, p)
}
func (h *podHeap) Pop() any {
	n := len(h.items) - 1
	p := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	p.heapIndex = -1
	return p
}

func (h *podHeap) add(p *QueuedPodInfo)    { heap.Push(h, p) }
func (h *podHeap) remove(p *QueuedPodInfo) { heap.Remove(h, p.heapIndex) }
func (h *podHeap) fix(p *QueuedPodInfo)    { heap.Fix(h, p.heapIndex) }
func (h *podHeap) pop() *QueuedPodInfo     { return heap.Pop(h).(*QueuedPodInfo) }
func (h *podHeap) peek() *QueuedPodInfo {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}
