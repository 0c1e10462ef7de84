"""waferflow.frontend"""
