// Package serviceaccounts is the registry entry for core/v1 service
// accounts: their server-side table columns and rows.
package serviceaccounts
