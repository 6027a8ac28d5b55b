package pg

// HoldBatches keeps the orders of product in queue q waiting, as if a
// transaction of theirs were running, until release starts them: how a
// test forms a batch of its choosing, in the order it chooses.
func HoldBatches(d *DB, q, product string) (release func()) {
	k := shelf{q, product}
	d.group.mu.Lock()
	d.group.waiting[k] = []*placing{}
	d.group.mu.Unlock()
	return func() { go d.group.run(k) }
}

// Waiting is the number of orders of product in q waiting for a batch.
func Waiting(d *DB, q, product string) int {
	d.group.mu.Lock()
	defer d.group.mu.Unlock()
	return len(d.group.waiting[shelf{q, product}])
}
