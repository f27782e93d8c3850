// Package noderesources holds the plugins that look at node resources: Fit
// (filter out nodes without room for the pod's requests, and prefer the least
// allocated nodes) and BalancedAllocation (prefer nodes whose cpu and memory
// would be used in equal proportion).
package noderesources
