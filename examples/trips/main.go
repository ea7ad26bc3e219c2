// Command trips is an example agent whose tool is a Temporal workflow of
// its own: book_trip runs the BookTrip saga (reserve a flight, then a
// hotel; if the hotel fails, cancel the flight) as a child of the turn
// (docs/workflow-tools.md).
//
//	go run . dev
//	go run . session send "book a trip to Lisbon"
//	go run . session send "book a trip to Atlantis"   # no hotel: the flight is cancelled
package main

import "github.com/eve-temporal/eve"

func main() { eve.Main(Agent) }
