package apiserver

import (
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// encodeObject writes obj to w with enc. Encoders that take a memory allocator
// (protobuf) get one from apimachinery's pool: they marshal into a reused
// buffer instead of allocating one the size of the object per call.
func encodeObject(enc runtime.Encoder, obj runtime.Object, w io.Writer) error {
	ea, ok := enc.(runtime.EncoderWithAllocator)
	if !ok {
		return enc.Encode(obj, w)
	}
	alloc := runtime.AllocatorPool.Get().(*runtime.Allocator)
	defer runtime.AllocatorPool.Put(alloc)
	return ea.EncodeWithAllocator(obj, w, alloc)
}
