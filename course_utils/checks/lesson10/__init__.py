"""Lesson 10's checks (the capstone speedrun): one module per exercise."""
