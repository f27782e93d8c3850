// Package ociimage builds small one-layer OCI images in memory, reproducibly,
// and writes them as OCI image-layout tar archives (the format `ctr images
// import` reads) or hands out their blobs for a registry push.
package ociimage
