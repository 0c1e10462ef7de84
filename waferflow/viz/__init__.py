"""waferflow.viz"""
