"""The round's record: RoundResult and every round field, declared once."""
