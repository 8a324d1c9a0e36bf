"""What every stage shares: errors, typed contracts, bundles and the family protocol."""
