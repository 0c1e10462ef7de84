"""waferflow.mapper"""
