// Package crilogs reads container log files in the CRI format that containerd writes
// ("2016-10-06T00:17:09.669794202Z stdout F message"), with the options of `kubectl
// logs`: tail, since, byte limit, timestamps, stream selection and follow.
package crilogs
